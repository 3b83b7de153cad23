package cpu

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestActive(t *testing.T) {
	tests := []struct {
		name           string
		o, share, cpus float64
		limit, want    int
	}{
		{"alone", 1, 1, 4, 4, 4},
		{"quarter", 1, 0.25, 4, 4, 1},
		{"a hair above a quarter", 1, 0.26, 4, 4, 2},
		{"exact product", 1.5, 1.0 / 3, 2, 3, 1},
		{"rounding error", 3, 0.1, 10, 10, 3}, // 3·0.1·10 is 3.0000000000000004 in floating point
		{"overcommit", 2, 0.5, 4, 8, 4},
		{"at least one", 1, 0, 4, 4, 1},
		{"negative share", 1, -0.5, 4, 4, 1},
		{"NaN share", 1, math.NaN(), 4, 4, 4},
		{"limit", 2, 1, 4, 6, 6},
		{"fractional budget", 1, 1, 1.5, 2, 2},
		{"zero limit", 1, 1, 4, 0, 1},
	}
	for _, tt := range tests {
		if got := Active(tt.o, tt.share, tt.cpus, tt.limit); got != tt.want {
			t.Errorf("%s: Active(%v, %v, %v, %d) = %d, want %d", tt.name, tt.o, tt.share, tt.cpus, tt.limit, got, tt.want)
		}
	}
}

func TestLimit(t *testing.T) {
	for _, tt := range []struct {
		o, cpus float64
		want    int
	}{{1, 2, 2}, {1.5, 2, 3}, {1, 1.5, 2}, {2, 0.25, 1}, {0.1, 0.5, 1}, {1, 0.3 * 3 / 0.9, 1}} {
		if got := Limit(tt.o, tt.cpus); got != tt.want {
			t.Errorf("Limit(%v, %v) = %d, want %d", tt.o, tt.cpus, got, tt.want)
		}
	}
}

func TestWindow(t *testing.T) {
	w := newWindow(3)
	ms := func(self, busy int) Sample {
		return Sample{Self: time.Duration(self) * time.Millisecond, Busy: time.Duration(busy) * time.Millisecond}
	}
	type push struct {
		s      Sample
		want   float64
		wantOK bool
	}
	for i, p := range []push{
		{ms(0, 0), 0, false},
		{ms(10, 40), 0.25, true},       // over 1 tick
		{ms(20, 60), 20.0 / 60, true},  // over 2
		{ms(30, 80), 30.0 / 80, true},  // over 3
		{ms(70, 120), 60.0 / 80, true}, // over the last 3: (70−10)/(120−40)
		{ms(70, 120), 50.0 / 60, true},
		{ms(70, 120), 40.0 / 40, true},
		{ms(70, 120), 1, true}, // nothing busy: 1
		{ms(0, 0), 0, false},   // backwards: restart
		{ms(5, 10), 0.5, true},
	} {
		got, ok := w.push(p.s)
		if ok != p.wantOK || (ok && math.Abs(got-p.want) > 1e-12) {
			t.Errorf("push %d (%v) = %v, %v; want %v, %v", i, p.s, got, ok, p.want, p.wantOK)
		}
	}
}

// scriptReader is a Reader whose counters a test moves: each Read adds
// the next scripted step to the cumulative sample.
type scriptReader struct {
	mu    sync.Mutex
	steps []scriptStep
	s     Sample
	reads int
	// per, if set, is added at each Read once the steps run out.
	per Sample
}

type scriptStep struct {
	d    Sample
	err  bool // the read fails
	back bool // the counters go back to zero
}

func (r *scriptReader) Read() (Sample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if len(r.steps) == 0 {
		r.s.Self += r.per.Self
		r.s.Busy += r.per.Busy
		return r.s, nil
	}
	st := r.steps[0]
	r.steps = r.steps[1:]
	switch {
	case st.err:
		return Sample{}, errors.New("scripted read error")
	case st.back:
		r.s = Sample{}
		return r.s, nil
	}
	r.s.Self += st.d.Self
	r.s.Busy += st.d.Busy
	return r.s, nil
}

// setRate makes every following Read add self and busy clock ticks.
func (r *scriptReader) setRate(self, busy int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.per = ticks(self, busy)
}

// noPark keeps the loop of an idle pool ticking.
func noPark(c *config) error { c.noPark = true; return nil }

func ticks(self, busy int) Sample {
	return Sample{Self: time.Duration(self) * 10 * time.Millisecond, Busy: time.Duration(busy) * 10 * time.Millisecond}
}

// TestLoopScripts runs the scripts of testdata/loop: each sets up a pool
// and lists, tick by tick, the counters its reader returns and the active
// count expected after the tick.
func TestLoopScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/loop/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runLoopScript(t, file)
		})
	}
}

type scriptLine struct {
	line int
	text string
	step scriptStep
	want int
}

func parseLoopScript(t *testing.T, file string) (opts []Option, lines []scriptLine) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		bad := func(err error) { t.Fatalf("%s:%d: %q: %v", file, n, text, err) }
		cmd, rest, _ := strings.Cut(text, " ")
		switch cmd {
		case "budget", "overcommit", "window", "tolerance":
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				bad(err)
			}
			opts = append(opts, map[string]func() Option{
				"budget":     func() Option { return WithBudget(v) },
				"overcommit": func() Option { return WithOvercommit(v) },
				"window":     func() Option { return WithWindow(int(v)) },
				"tolerance":  func() Option { return WithTolerance(v) },
			}[cmd]())
		case "tick", "error", "back":
			before, after, ok := strings.Cut(text, "->")
			if !ok {
				bad(errors.New("no -> ACTIVE"))
			}
			want, err := strconv.Atoi(strings.TrimSpace(after))
			if err != nil {
				bad(err)
			}
			l := scriptLine{line: n, text: text, want: want}
			switch cmd {
			case "error":
				l.step.err = true
			case "back":
				l.step.back = true
			default:
				var self, busy int
				if _, err := fmt.Sscanf(before, "tick %d %d", &self, &busy); err != nil {
					bad(err)
				}
				l.step.d = ticks(self, busy)
			}
			lines = append(lines, l)
		default:
			bad(errors.New("unknown command"))
		}
	}
	return opts, lines
}

func runLoopScript(t *testing.T, file string) {
	opts, lines := parseLoopScript(t, file)
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{}
		for _, l := range lines {
			r.steps = append(r.steps, l.step)
		}
		var got []int
		p, err := NewPool(append(opts, WithReader(r), WithTick(10*time.Millisecond), noPark,
			WithObserver(func(s StepInfo) { got = append(got, s.Active) }))...)
		if err != nil {
			t.Fatal(err)
		}
		// Each tick of the loop is one line of the script.
		time.Sleep(time.Duration(len(lines))*10*time.Millisecond + time.Millisecond)
		synctest.Wait()
		p.Close()
		if len(got) < len(lines) {
			t.Fatalf("%d ticks for %d lines", len(got), len(lines))
		}
		for i, l := range lines {
			if got[i] != l.want {
				t.Errorf("%s:%d: %q: active %d", file, l.line, l.text, got[i])
			}
		}
	})
}

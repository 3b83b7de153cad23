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
	ms := func(self, busy, total int) Sample {
		return Sample{Self: time.Duration(self) * time.Millisecond, Busy: time.Duration(busy) * time.Millisecond,
			Total: time.Duration(total) * time.Millisecond}
	}
	type push struct {
		s                   Sample
		running             int
		share, others, mean float64
		wantOK              bool
	}
	for i, p := range []push{
		{ms(0, 0, 0), 1, 0, 0, 0, false},
		{ms(10, 40, 80), 2, 0.25, 30.0 / 80, 2, true},               // over 1 tick
		{ms(20, 60, 160), 4, 20.0 / 60, 40.0 / 160, 3, true},        // over 2
		{ms(30, 80, 240), 0, 30.0 / 80, 50.0 / 240, 2, true},        // over 3
		{ms(70, 120, 320), 0, 60.0 / 80, 20.0 / 240, 4.0 / 3, true}, // over the last 3: (70−10)/(120−40)
		{ms(70, 120, 400), 0, 50.0 / 60, 10.0 / 240, 0, true},
		{ms(70, 120, 480), 0, 40.0 / 40, 0, 0, true},
		{ms(70, 120, 560), 0, 1, 0, 0, true}, // nothing busy: share 1
		{ms(0, 0, 0), 0, 0, 0, 0, false},     // backwards: restart
		{ms(5, 10, 20), 3, 0.5, 0.25, 3, true},
	} {
		got, ok := w.push(p.s, p.running)
		if ok != p.wantOK || (ok && (math.Abs(got.share-p.share) > 1e-12 || math.Abs(got.others-p.others) > 1e-12 || math.Abs(got.running-p.mean) > 1e-12)) {
			t.Errorf("push %d (%v, %d) = %+v, %v; want share %v, others %v, running %v, %v", i, p.s, p.running, got, ok, p.share, p.others, p.mean, p.wantOK)
		}
	}
}

func TestWindowRecent(t *testing.T) {
	w := newWindow(4)
	if _, ok := w.recent(2); ok {
		t.Error("an empty window measured the recent ticks")
	}
	for i, s := range []Sample{{Total: 0}, {Self: 10, Busy: 20, Total: 40}, {Self: 20, Busy: 60, Total: 80}, {Self: 30, Busy: 100, Total: 120}} {
		w.push(s, i)
	}
	// The last two ticks: self 20 of 80, busy 80 of 80, running 2 then 3.
	e, ok := w.recent(2)
	if !ok || e.self != 0.25 || e.others != 0.75 || e.running != 2.5 {
		t.Errorf("recent(2) = %+v, %v", e, ok)
	}
	// More than the window holds: all of it.
	if e, ok := w.recent(10); !ok || e.self != 0.25 || e.running != 2 {
		t.Errorf("recent(10) = %+v, %v", e, ok)
	}
}

// scriptReader is a Reader whose counters a test moves: each Read adds
// the next scripted step to the cumulative sample.
type scriptReader struct {
	// host is the number of CPUs: each Read adds host clock ticks to the
	// total time (4 if 0).
	host  int
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
	h := r.host
	if h == 0 {
		h = 4
	}
	r.s.Total += time.Duration(h) * 10 * time.Millisecond
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
func noPark(c *config) { c.noPark = true }

// withSeed seeds the control's jitter.
func withSeed(seed uint64) Option { return func(c *config) { c.seed = seed } }

// withHost sets the host's CPUs, instead of reading them.
func withHost(n int) Option { return func(c *config) { c.host = n } }

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

func parseLoopScript(t *testing.T, file string) (opts []Option, host int, lines []scriptLine) {
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
		case "budget", "overcommit", "window", "tolerance", "host":
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				bad(err)
			}
			opts = append(opts, map[string]func() Option{
				"budget":     func() Option { return WithBudget(v) },
				"overcommit": func() Option { return WithOvercommit(v) },
				"window":     func() Option { return WithWindow(int(v)) },
				"tolerance":  func() Option { return WithTolerance(v) },
				"host":       func() Option { host = int(v); return withHost(int(v)) },
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
	return opts, host, lines
}

func runLoopScript(t *testing.T, file string) {
	opts, host, lines := parseLoopScript(t, file)
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{host: host}
		for _, l := range lines {
			r.steps = append(r.steps, l.step)
		}
		var got []int
		if host == 0 {
			host = 4
		}
		r.host = host
		p, err := NewPool(append(opts, withHost(host), withSeed(1), WithReader(r), WithTick(10*time.Millisecond), noPark,
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

// TestFreeRounding: the saturation correction reads as contention only
// a shortfall of the process's CPU time that the counter's rounding
// cannot explain. Over three ticks of a 6-CPU host exactly full (4 hog
// threads, 2 workers, nobody waiting) the pool's counter moved 5 ticks
// instead of 6 once; the host's busy time 17 of 18. Read at face value
// the hogs want 4 · 2/(5/3) = 4.8 CPUs and the pool falls to one worker;
// they want 4. Two workers beside one runnable thread on 2 CPUs, where
// the shortfall is real, are still corrected: the neighbour wants 1 CPU,
// not the 2/3 it gets, and leaves 1.
func TestFreeRounding(t *testing.T) {
	const q = 10 * time.Millisecond
	full := measure(point{}, point{s: Sample{Self: 5 * q, Busy: 17 * q, Total: 18 * q}, running: 6}, 3)
	if free, others := full.free(6, 6, q); math.Abs(free-2) > 1e-9 || math.Abs(others-4) > 1e-9 {
		t.Errorf("exactly full host: free %v, others %v; want 2 and 4", free, others)
	}
	if free, _ := full.free(6, 6, 0); free > 1.25 {
		t.Errorf("without the rounding allowance: free %v; the case no longer tests it", free)
	}
	// 2 workers and 1 neighbour thread on 2 CPUs over a window of 10
	// ticks: the pool gets 4/3 of a CPU (13 ticks, rounded down), the
	// neighbour 2/3.
	over := measure(point{}, point{s: Sample{Self: 13 * q, Busy: 20 * q, Total: 20 * q}, running: 20}, 10)
	if free, others := over.free(2, 2, q); free > 1.25 || others < 0.75 {
		t.Errorf("oversubscribed host: free %v, others %v; want at most 1.25 and at least 0.75", free, others)
	}
}

// TestFreeSteal: the time the hypervisor stole is a CPU the host did not
// have, counted with the neighbours, and the host is saturated when its
// busy time fills what was left.
func TestFreeSteal(t *testing.T) {
	const q = 10 * time.Millisecond
	// 2 CPUs over 10 ticks (20 ticks of host time): the process used 4
	// ticks, a neighbour 9, and the hypervisor took 7; the rest idle.
	e := measure(point{}, point{s: Sample{Self: 4 * q, Busy: 13 * q, Total: 20 * q, Steal: 7 * q}, running: 4}, 10)
	if free, others := e.free(2, 2, q); math.Abs(others-1.6) > 1e-9 || math.Abs(free-0.4) > 1e-9 {
		t.Errorf("steal as a neighbour: free %v, others %v; want 0.4 and 1.6", free, others)
	}
	if free, _ := e.withoutSteal().free(2, 2, q); math.Abs(free-1.1) > 1e-9 {
		t.Errorf("steal read as idle: free %v, want 1.1", free)
	}
	// Saturated once the steal is taken out: 2 CPUs, half of one stolen
	// (5 of 20 ticks), 14 busy of the 15 left; the pool ran 2 workers
	// and got 6 ticks, so its neighbour (8 ticks) wants more than it got.
	s := measure(point{}, point{s: Sample{Self: 6 * q, Busy: 14 * q, Total: 20 * q, Steal: 5 * q}, running: 20}, 10)
	_, others := s.free(2, 2, q)
	if want := 0.8*2/0.7 + 0.5; math.Abs(others-want) > 1e-9 {
		t.Errorf("saturated beside steal: others %v, want %v (the neighbours' use scaled by running/self, plus the steal)", others, want)
	}
}

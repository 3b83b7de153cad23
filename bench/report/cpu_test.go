package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench"
)

// cpuResults is a cpu-suite results file: k2 with its five controllers,
// and a failed k3 row.
func cpuResults() *bench.Results {
	row := func(ctl string, p99, tput float64) bench.Row {
		return bench.Row{Suite: "cpu", Case: "k2", Controller: ctl, P99Ms: p99, MaxMs: 2 * p99, QueueP99Ms: 100,
			Throughput: tput, Offered: 500, ActiveMean: 2, Background: 0.5}
	}
	return &bench.Results{
		Suite: "cpu", Seed: 1, Duration: "4s",
		Machine: bench.Machine{GoVersion: "go1.26", OS: "linux", Arch: "amd64", CPUs: 2},
		Params:  map[string]string{"work item": "fib(30)", "offered load": "90%"},
		Rows: []bench.Row{
			row("ignorant", 30, 400), row("optimal", 10, 420), row("friendly-o1", 9, 380),
			row("friendly-o1.5", 14, 400), row("friendly-o2", 25, 250),
			{Suite: "cpu", Case: "k3", Controller: "friendly-o1", Error: "process 1: exit status 1"},
		},
	}
}

func TestCPUTable(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, cpuResults().Rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"P99_MS", "QUEUE_P99_MS", "TPUT:THIS/IGN", "3.33×", "0.90×", "0.95×", "targets met", "FAILED: process 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The inproc columns are not there.
	if strings.Contains(out, "P99_NORM") {
		t.Errorf("cpu table with inproc columns:\n%s", out)
	}
}

func TestTargets(t *testing.T) {
	for _, tt := range []struct {
		c    string
		r    cpuRatios
		want string
	}{
		{"k2", cpuRatios{3, 1.3, 1 / 1.1, true, true}, "targets met"},
		{"k3", cpuRatios{1.1, 1.31, 1, true, true}, "missed: p99 over 1.3× optimal"},
		{"k4", cpuRatios{3, 1.6, 0.9, true, true}, "missed: p99 over 1.3× optimal, throughput under 1/1.1 of ignorant"},
		{"hog", cpuRatios{1, 1.2, 0.5, true, true}, "targets met"},
		{"k1", cpuRatios{1 / 1.05, 0, 0.95, true, false}, "targets met"},
		{"k1", cpuRatios{1 / 1.06, 0, 0.94, true, false}, "missed: p99 over 1.05× ignorant, throughput under 0.95 of ignorant"},
	} {
		if got, ok := targetsMet(tt.c, tt.r); !ok || got != tt.want {
			t.Errorf("targetsMet(%s, %+v) = %q, want %q", tt.c, tt.r, got, tt.want)
		}
	}
	if _, ok := targetsMet("k2", cpuRatios{}); ok {
		t.Error("targets judged without ignorant and optimal rows")
	}
}

// TestMarkdownAll: the first results are written as Markdown writes them
// alone, the cpu suite's follow with their own table.
func TestMarkdownAll(t *testing.T) {
	var one, all bytes.Buffer
	if err := Markdown(&one, synthetic()); err != nil {
		t.Fatal(err)
	}
	if err := MarkdownAll(&all, []*bench.Results{synthetic(), cpuResults()}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(all.String(), one.String()) {
		t.Errorf("the first results are not written as alone")
	}
	rest := strings.TrimPrefix(all.String(), one.String())
	for _, want := range []string{"## Machine and parameters of suite `cpu`", "## Suite `cpu`", "| work item | fib(30) |",
		"| `k2` | `friendly-o1` | 9.00 | 18.0 | 100 | 380.0 | 500.0 | 2.00 | 0.50 | 3.33× | 0.90× | 0.95× | targets met |",
		"**failed**: process 1"} {
		if !strings.Contains(rest, want) {
			t.Errorf("cpu section lacks %q:\n%s", want, rest)
		}
	}
	if strings.Contains(rest, "throughput_norm") {
		t.Errorf("cpu section with the inproc columns:\n%s", rest)
	}
	if err := MarkdownAll(&all, nil); err == nil {
		t.Error("MarkdownAll of nothing succeeded")
	}
}

func TestCPUBaselines(t *testing.T) {
	row := func(cs, ctl string, p99, tput float64) bench.Row {
		return bench.Row{Suite: cpuSuite, Case: cs, Controller: ctl, P99Ms: p99, Throughput: tput}
	}
	rows := []bench.Row{
		row("k2", "ignorant", 20, 400), row("k2", "optimal", 10, 380), row("k2", "static-2", 8, 390), row("k2", "friendly-o1", 12, 395),
		row("k3", "ignorant", 20, 400), // no friendly row: no line
	}
	got := CPUBaselines(rows)
	want := "k2: friendly-o1 p99 12.0 ms, 395/s; the best static pool (static-2, of ignorant, optimal, static-2) 8.0 ms, 390/s: p99 1.50×, throughput 1.01×"
	if len(got) != 1 || got[0] != want {
		t.Errorf("CPUBaselines = %q, want [%q]", got, want)
	}
}

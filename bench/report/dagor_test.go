package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/bench"
)

func dagorRows() []bench.Row {
	row := func(cs, ctl string, feed, success float64) bench.Row {
		return bench.Row{Suite: dagorSuite, Case: cs, Controller: ctl, FeedRatio: feed, SuccessRate: success, OptimalSuccessRate: min(1, 1/feed)}
	}
	m4 := row("M4", "dagor", 4, 0.2)
	m4.OptimalSuccessRate = 0.24 // the measured optimum, below the nominal 1/4
	mixed := row("mixed", "dagor", 2, 0.45)
	mixed.SuccessByCalls = []float64{0.5, 0.48, 0.46, 0.40}
	return []bench.Row{
		row("M1", "dagor", 4, 0.24), row("M1", "codel", 4, 0.2),
		row("M3", "dagor", 2, 0.48), row("M3", "codel", 2, 0.2), row("M3", "codel@10ms/100ms", 2, 0.3),
		row("M3", "codel@20ms/100ms", 2, 0.25),
		m4, row("M4", "dagor", 2, 0.3), row("M4", "codel", 2, 0),
		mixed,
		row("M3", "random", 4, 0.1), row("M3", "random@50ms/10ms", 4, 0.15), row("M3", "dagor", 4, 0.24),
		{Suite: dagorSuite, Case: "M1", Controller: "dagor", FeedRatio: 2, Error: "M did not start <b>|"},
	}
}

func TestDagorTargets(t *testing.T) {
	got := DagorTargets(dagorRows())
	want := []string{
		"met: dagor on M1 at 4×: 0.96 of the optimum (target ≥ 0.95)",
		"met: dagor on M3 at 2×: 0.96 of the optimum (target ≥ 0.95)",
		"met: dagor on M3 at 4×: 0.96 of the optimum (target ≥ 0.95)",
		"missed: dagor on M4 at 2×: 0.60 of the optimum (target ≥ 0.95)",
		"missed: dagor on M4 at 4×: 0.83 of the optimum (target ≥ 0.95)",
		"met: dagor on M3 at 2×: 2.40 × the success rate of codel (default) (target ≥ 1.5)",
		"met: dagor on M3 at 2×: 1.60 × the success rate of the best-tuned codel (codel@10ms/100ms) (target ≥ 1.5)",
		"met: dagor on M4 at 2×: 30.0% success where codel (default) has none (target ≥ 1.5 ×)",
		"met: dagor on M4 at 2×: 30.0% success where the best-tuned codel (codel) has none (target ≥ 1.5 ×)",
		"missed: dagor on mixed at 2×: success by calls 50.0%/48.0%/46.0%/40.0%, spread 20 % (target ≤ 10 %)",
		"missed: anchor of codel (default) on M1 at 4×: 20.0% against dagor's 24.0%, 0.83 of it (the DAGOR paper: all alike on M1; target within 10 %)",
		"missed: anchor of the best-tuned codel (codel) on M1 at 4×: 20.0% against dagor's 24.0%, 0.83 of it (target within 10 %)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("targets (-want +got):\n%s", d)
	}
}

func TestDagorReports(t *testing.T) {
	var md bytes.Buffer
	if err := Markdown(&md, &bench.Results{Suite: dagorSuite, Rows: dagorRows()}); err != nil {
		t.Fatal(err)
	}
	s := md.String()
	for _, want := range []string{"### Workload `M4`: success rate", "| 4× | 24.0% | 20.0% (0.83) |", "### Targets of `dagor`", "failed", "1/2/3/4",
		"`codel` best-tuned |", "30.0% (0.60) at 10ms/100ms |", "### Settings of `codel`: success rate", "| default | **20.0%** | 20.0% | **0.0%** |", "| 10ms/100ms | – | **30.0%** | – |",
		"### Settings of `random`: success rate", "Each setting is WINDOW/THRESHOLD", "| 50ms/10ms | **15.0%** |"} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(s, "<b>") || strings.Contains(s, "Each row is one (case, controller) pair, normalized") {
		t.Errorf("markdown has raw HTML or the inproc preamble:\n%s", s)
	}
	var tb bytes.Buffer
	if err := Table(&tb, dagorRows()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "OF_OPTIMAL") || strings.Contains(tb.String(), "TPUT_NORM") {
		t.Errorf("table:\n%s", tb.String())
	}
}

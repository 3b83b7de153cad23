package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench"
)

func TestBestNormalized(t *testing.T) {
	row := func(cs, ctl string, slo, thr, p99 float64) bench.Row {
		return bench.Row{Suite: "inproc", Case: cs, Controller: ctl, SLOAttainment: slo, ThroughputNorm: thr, P99Norm: p99}
	}
	rows := []bench.Row{
		row("a", "codel", 0.9, 1, 2), row("a", "codel@1ms/50ms", 0.95, 0.9, 3), row("a", "codel@20ms/200ms", 0.95, 0.95, 4),
		row("b", "codel", 0.9, 1, 2), row("b", "codel@1ms/50ms", 0.9, 1, 2), // a tie: the default wins
		row("c", "codel@1ms/50ms", 0.5, 1, 1), {Suite: "inproc", Case: "c", Controller: "codel", Error: "boom"},
		row("a", "moirai", 1, 1, 1),
	}
	for _, tc := range []struct{ cs, want string }{{"a", "codel@20ms/200ms"}, {"b", "codel"}, {"c", "codel@1ms/50ms"}} {
		if r, ok := bestNormalized(rows, "codel", tc.cs); !ok || r.Controller != tc.want {
			t.Errorf("case %s: best %q (%v), want %q", tc.cs, r.Controller, ok, tc.want)
		}
	}
	if _, ok := bestNormalized(rows, "breakwater", "a"); ok {
		t.Error("a best row of a controller with none")
	}
	var md bytes.Buffer
	if err := Markdown(&md, &bench.Results{Suite: "inproc", Rows: rows}); err != nil {
		t.Fatal(err)
	}
	s := md.String()
	for _, want := range []string{"### Baselines at their best in `inproc`", "| `a` | 90.0%, 1.00 / 2.00, 0.0% | 95.0%, 0.95 / 4.00, 0.0% at 20ms/200ms |", "| `c` | failed | 50.0%, 1.00 / 1.00, 0.0% at 1ms/50ms |"} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(s, "`moirai` best-tuned") {
		t.Error("a best-tuned column for a controller run at no setting")
	}
}

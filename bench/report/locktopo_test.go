package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench"
)

func ltRows() []bench.Row {
	return []bench.Row{
		{Suite: locktopoSuite, Case: "row-queue", Controller: "guard", Server: "postgres", Scenarios: 12, Actionable: 6, RootActed: 6, MaxMs: 360},
		{Suite: locktopoSuite, Case: "ddl-queue-nomdl", Controller: "guard", Server: "mysql", Skipped: 3, Note: "no <option>"},
		{Suite: locktopoSuite, Case: "all", Controller: "guard", Server: "postgres", Scenarios: 12, Actionable: 6, RootActed: 5, RootLate: 1, WrongActions: 2, WrongScenarios: 1, MaxMs: 360},
	}
}

// TestLocktopoReport: the suite's rows get their own table and section,
// with the counts per topology, the share of roots acted on and the
// reason of a skip, escaped.
func TestLocktopoReport(t *testing.T) {
	var tb bytes.Buffer
	if err := Table(&tb, ltRows()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SERVER", "WRONG_ACTIONS", "postgres  row-queue", "6 (100.0%)", "5 (83.3%)"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if strings.Contains(tb.String(), "TPUT_NORM") {
		t.Errorf("table has the normalized suites' header:\n%s", tb.String())
	}
	var md bytes.Buffer
	if err := Markdown(&md, &bench.Results{Suite: locktopoSuite, Rows: ltRows(), Params: map[string]string{"scenarios": "12"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Suite `locktopo`", "| `postgres` | **all** | 12 | 6 | 5 (83.3%) | 1 | 2 | 1 | 360 | 0 | 0 | 0 |",
		"| `mysql` | `ddl-queue-nomdl` | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 3 (no &lt;option&gt;) |", "--replay SEED"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "throughput_norm") {
		t.Errorf("Markdown explains the normalized suites' columns:\n%s", md.String())
	}
}

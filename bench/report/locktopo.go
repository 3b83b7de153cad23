package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/moirai-go/moirai/bench"
)

// locktopoSuite is the suite of generated lock topologies, whose rows
// are tallies of scenarios per (server, topology).
const locktopoSuite = "locktopo"

// splitLocktopo separates the locktopo suite's rows from the others.
func splitLocktopo(rows []bench.Row) (others, lt []bench.Row) {
	for _, r := range rows {
		if r.Suite == locktopoSuite {
			lt = append(lt, r)
		} else {
			others = append(others, r)
		}
	}
	return others, lt
}

// locktopoTable writes the locktopo suite's rows for a terminal.
func locktopoTable(w io.Writer, rows []bench.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOPOLOGY\tSCENARIOS\tACTIONABLE\tROOT_ACTED\tLATE\tWRONG_ACTIONS\tWRONG_SCENARIOS\tMAX_ROOT_MS\tBUILD_FAILED\tDISTURBED\tSKIPPED")
	for _, r := range rows {
		cells := []string{oneLine(r.Server), oneLine(r.Case), fmt.Sprint(r.Scenarios), fmt.Sprint(r.Actionable),
			fmtRootActed(r), fmt.Sprint(r.RootLate), fmt.Sprint(r.WrongActions), fmt.Sprint(r.WrongScenarios),
			fmt.Sprintf("%.0f", r.MaxMs), fmt.Sprint(r.BuildFailed), fmt.Sprint(r.Disturbed), fmt.Sprint(r.Skipped)}
		if r.Error != "" {
			cells = append(cells[:2], oneLine("FAILED: "+r.Error))
		}
		for i, c := range cells {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fmtRootActed(r bench.Row) string {
	if r.Actionable == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", r.RootActed, fmtPct(float64(r.RootActed)/float64(r.Actionable)))
}

// markdownLocktopo writes the locktopo suite's section of RESULTS.md, its
// rows in the order of r (per server, then per topology; grouping them by
// case would interleave the servers).
func markdownLocktopo(p func(string, ...any), r *bench.Results, _ []bench.Row) {
	_, rows := splitLocktopo(r.Rows)
	p("Generated lock situations on the real servers, each with its ground truth known by construction, under an acting `moirai guard` scoped to the run's own database. ")
	p("*Actionable*: the scenario has a contended object whose roots (holders that wait for nothing) the guard may act on (active, not protected, not a superuser, in its database; idle in transaction only with terminate-idle). ")
	p("*Root acted*: every such root was acted on in time: the first within the objective plus two polls of the first wait, each further one within the guard's minimum interval between actions (1 s) plus a poll after the one before; *late*: acted on after that. ")
	p("*Wrong actions*: actions on a session that was waiting, on a root that is not actionable, or on a session outside the scenario (the target: 0). ")
	p("*Max root ms*: the slowest in-time root action, from the first wait. *Disturbed*: scenarios another client of the shared server changed (MariaDB: its global read lock stalled the scenario, or its writes queued behind the scenario's FTWRL, so the chain crossed the guard's scope); they are not counted. A failing scenario's seed replays it: `moirai bench run --suite locktopo --replay SEED`.\n\n")
	markdownParams(p, r)
	p("| server | topology | scenarios | actionable | root acted | late | wrong actions | scenarios with a wrong action | max root ms | not built | disturbed | skipped |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, row := range rows {
		if row.Error != "" {
			p("| %s | %s | – | – | – | – | – | – | – | – | – | **failed**: %s |\n", mdCode(row.Server), mdCode(row.Case), mdText(row.Error))
			continue
		}
		skipped := fmt.Sprint(row.Skipped)
		if row.Skipped > 0 && row.Note != "" {
			skipped += " (" + mdText(row.Note) + ")"
		}
		topo := mdCode(row.Case)
		if row.Case == "all" {
			topo = "**all**"
		}
		p("| %s | %s | %d | %d | %s | %d | %d | %d | %.0f | %d | %d | %s |\n", mdCode(row.Server), topo, row.Scenarios, row.Actionable,
			fmtRootActed(row), row.RootLate, row.WrongActions, row.WrongScenarios, row.MaxMs, row.BuildFailed, row.Disturbed, skipped)
	}
	p("\n")
}

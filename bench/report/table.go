package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/moirai-go/moirai/bench"
)

// tableHeader is the header of the terminal table.
var tableHeader = []string{
	"CASE", "CONTROLLER", "TPUT_NORM", "P99_NORM", "DROP", "CANCELLED(C/V)",
	"REJECTED", "SLO", "VICTIM_MS(N/U/R)", "R", "STATUS",
}

// Table writes rows as an aligned plain-text table for a terminal (`moirai
// bench run -o table`): one line per row, numbers formatted as in the
// other reports. A failed row shows its error in the STATUS column; the
// uncontrolled row shows whether the case degrades.
//
// The cpu suite's rows have their own columns (latencies, throughput,
// ratios to the ignorant and optimal pools); they follow the others in a
// table of their own.
func Table(w io.Writer, rows []bench.Row) error {
	rows, cpu := splitCPU(rows)
	rows, dagor := splitDagor(rows)
	rows, pf := splitPathfence(rows)
	rows, lt := splitLocktopo(rows)
	var parts []func() error
	if len(rows) > 0 || (len(cpu) == 0 && len(dagor) == 0 && len(pf) == 0 && len(lt) == 0) {
		parts = append(parts, func() error { return table(w, rows) })
	}
	if len(cpu) > 0 {
		parts = append(parts, func() error { return cpuTable(w, cpu) })
	}
	if len(dagor) > 0 {
		parts = append(parts, func() error { return dagorTable(w, dagor) })
	}
	if len(pf) > 0 {
		parts = append(parts, func() error { return pathfenceTable(w, pf) })
	}
	if len(lt) > 0 {
		parts = append(parts, func() error { return locktopoTable(w, lt) })
	}
	for i, part := range parts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := part(); err != nil {
			return err
		}
	}
	return nil
}

func table(w io.Writer, rows []bench.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for _, row := range rows {
		cells := []string{oneLine(row.Case), oneLine(row.Controller)}
		if row.Error != "" {
			cells = append(cells, "-", "-", "-", "-", "-", "-", "-", "-")
		} else {
			cells = append(cells,
				fmtNorm(row.ThroughputNorm),
				fmtNorm(row.P99Norm),
				fmtPct(row.DropRate),
				fmtCancelled(row),
				fmt.Sprint(row.Rejected),
				fmtPct(row.SLOAttainment),
				strings.ReplaceAll(fmtVictims(row), " ", ""),
				fmtReduction(row),
			)
		}
		st := oneLine(status(row))
		if st == "" {
			st = "ok" // never empty: the line would end in padding
		}
		cells = append(cells, st)
		for i, c := range cells {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// printable replaces the control characters of s: a tab would break the
// columns, an escape sequence would reach the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

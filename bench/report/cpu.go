package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/moirai-go/moirai/bench"
)

// cpuSuite is the name of the suite whose rows have their own columns:
// latencies and throughput instead of ratios to a normal run.
const cpuSuite = "cpu"

// cpuRatios are a cpu-suite row's figures relative to the ignorant and
// optimal rows of its case.
type cpuRatios struct {
	// P99VsIgnorant is ignorant's p99 over this row's (how many times
	// lower); P99VsOptimal this row's p99 over optimal's (how many times
	// higher); TputVsIgnorant this row's throughput over ignorant's.
	P99VsIgnorant, P99VsOptimal, TputVsIgnorant float64
	HasIgnorant, HasOptimal                     bool
}

func ratiosOf(row bench.Row, rows []bench.Row) cpuRatios {
	var r cpuRatios
	for _, o := range rows {
		if o.Case != row.Case || o.Error != "" || row.Error != "" {
			continue
		}
		switch o.Controller {
		case "ignorant":
			if row.P99Ms > 0 && o.Throughput > 0 {
				r.P99VsIgnorant, r.TputVsIgnorant, r.HasIgnorant = o.P99Ms/row.P99Ms, row.Throughput/o.Throughput, true
			}
		case "optimal":
			if o.P99Ms > 0 {
				r.P99VsOptimal, r.HasOptimal = row.P99Ms/o.P99Ms, true
			}
		}
	}
	return r
}

// targetsMet says whether a friendly row with O = 1 meets the targets of
// its case. With neighbours (K ≥ 2, and the hog and rogue cases): p99
// within 1.3× of optimal's, and, for K ≥ 2, throughput at least 1/1.1 of
// ignorant's (beside a hog or a rogue, the ignorant pool takes CPU from
// its neighbour, and its throughput is no target). Alone (k1): p99 and
// throughput within 5 % of ignorant's. It is asked only of friendly-o1
// rows.
func targetsMet(caseName string, r cpuRatios) (string, bool) {
	if !r.HasIgnorant || (!r.HasOptimal && caseName != "k1") {
		return "", false
	}
	var miss []string
	switch caseName {
	case "k1":
		if 1/r.P99VsIgnorant > 1.05 {
			miss = append(miss, "p99 over 1.05× ignorant")
		}
		if r.TputVsIgnorant < 0.95 {
			miss = append(miss, "throughput under 0.95 of ignorant")
		}
	default:
		if r.P99VsOptimal > 1.3 {
			miss = append(miss, "p99 over 1.3× optimal")
		}
		if r.TputVsIgnorant < 1/1.1 && caseName != "hog" && caseName != "rogue" {
			miss = append(miss, "throughput under 1/1.1 of ignorant")
		}
	}
	if len(miss) == 0 {
		return "targets met", true
	}
	return "missed: " + strings.Join(miss, ", "), true
}

func cpuStatus(row bench.Row, rows []bench.Row) string {
	if row.Error != "" {
		return "FAILED: " + row.Error
	}
	if row.Controller != "friendly-o1" {
		return ""
	}
	s, _ := targetsMet(row.Case, ratiosOf(row, rows))
	return s
}

func fmtX(x float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmtNorm(x) + "×"
}

// cpuTableHeader is the header of the cpu suite's terminal table.
var cpuTableHeader = []string{
	"CASE", "CONTROLLER", "P99_MS", "MAX_MS", "QUEUE_P99_MS", "TPUT/S", "OFFERED/S", "WORKERS", "BACKGROUND",
	"P99:IGN/THIS", "P99:THIS/OPT", "TPUT:THIS/IGN", "STATUS",
}

// cpuTable writes the cpu suite's rows for a terminal.
func cpuTable(w io.Writer, rows []bench.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cpuTableHeader, "\t"))
	for _, row := range rows {
		cells := []string{oneLine(row.Case), oneLine(row.Controller)}
		if row.Error != "" {
			cells = append(cells, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
		} else {
			r := ratiosOf(row, rows)
			cells = append(cells, fmtMs(row.P99Ms), fmtMs(row.MaxMs), fmtMs(row.QueueP99Ms),
				fmtRate(row.Throughput), fmtRate(row.Offered), fmtNorm(row.ActiveMean), fmtNorm(row.Background),
				fmtX(r.P99VsIgnorant, r.HasIgnorant), fmtX(r.P99VsOptimal, r.HasOptimal), fmtX(r.TputVsIgnorant, r.HasIgnorant))
		}
		st := oneLine(cpuStatus(row, rows))
		if st == "" {
			st = "ok"
		}
		cells = append(cells, st)
		for i, c := range cells {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fmtRate(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// splitCPU separates the cpu suite's rows from the others.
func splitCPU(rows []bench.Row) (others, cpu []bench.Row) {
	for _, r := range rows {
		if r.Suite == cpuSuite {
			cpu = append(cpu, r)
		} else {
			others = append(others, r)
		}
	}
	return others, cpu
}

// mdCPUHeader is the header of the cpu suite's Markdown table.
const mdCPUHeader = "| case | controller | work p99 ms | work max ms | queue p99 ms | throughput /s | offered /s | workers (mean, all processes) | background CPUs | p99: ignorant / this | p99: this / optimal | throughput: this / ignorant | targets (friendly O = 1) |\n" +
	"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n"

// markdownCPU writes the cpu suite's section of RESULTS.md: the
// parameters, the table over K and controllers, and the trade-off over O.
func markdownCPU(p func(string, ...any), r *bench.Results, rows []bench.Row) {
	p("Each row is one (case, controller) pair: case *kK* runs K processes of the same pool at once on this host, each offered an equal part of the load. ")
	p("*work* latency is an item's time from its start on a worker to its end (how much the CPU was shared while it ran); ")
	p("*queue* latency its time from arrival to start (items still queued at the end count with their time so far); percentiles are over the items of all K processes. ")
	p("*throughput* is the items completed per second, all processes summed; *workers* the pools' mean active counts, summed; ")
	p("*background* the CPUs the host's other processes kept busy meanwhile (other work on a shared machine: it competes with every pool alike). ")
	p("The ratio columns compare a row with the `ignorant` and `optimal` rows of its case.\n\n")
	markdownParams(p, r)
	p("%s", mdCPUHeader)
	for _, row := range rows {
		p("| %s | %s | ", mdCode(row.Case), mdCode(row.Controller))
		if row.Error != "" {
			p("– | – | – | – | – | – | – | – | – | – | **failed**: %s |\n", mdText(row.Error))
			continue
		}
		q := ratiosOf(row, rows)
		p("%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			fmtMs(row.P99Ms), fmtMs(row.MaxMs), fmtMs(row.QueueP99Ms), fmtRate(row.Throughput), fmtRate(row.Offered),
			fmtNorm(row.ActiveMean), fmtNorm(row.Background),
			fmtX(q.P99VsIgnorant, q.HasIgnorant), fmtX(q.P99VsOptimal, q.HasOptimal), fmtX(q.TputVsIgnorant, q.HasIgnorant),
			mdText(cpuStatus(row, rows)))
	}
	p("\n")
	if b := CPUBaselines(rows); len(b) > 0 {
		p("### Static pools at their best\n\n")
		p("friendly-o1 against the static pool (ignorant, optimal or a static-N of the sweep) with the lowest work p99 on each case, ")
		p("and that pool's throughput beside it.\n\n")
		for _, line := range b {
			p("- %s\n", mdText(line))
		}
		p("\n")
	}
}

// CPUBaselines compares friendly-o1 on each case with the static pool
// of the lowest work p99 there (ignorant, optimal, static-N): one line per
// case that has both.
func CPUBaselines(rows []bench.Row) []string {
	var out []string
	var cases []string
	for _, r := range rows {
		if !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
	}
	for _, cs := range cases {
		var fr, best bench.Row
		var okF, okB bool
		var static []string
		for _, r := range rows {
			if r.Case != cs || r.Error != "" {
				continue
			}
			switch {
			case r.Controller == "friendly-o1":
				fr, okF = r, true
			case r.Controller == "ignorant" || r.Controller == "optimal" || strings.HasPrefix(r.Controller, "static-"):
				static = append(static, r.Controller)
				if !okB || r.P99Ms < best.P99Ms {
					best, okB = r, true
				}
			}
		}
		if !okF || !okB || best.P99Ms <= 0 || best.Throughput <= 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: friendly-o1 p99 %.1f ms, %.0f/s; the best static pool (%s, of %s) %.1f ms, %.0f/s: p99 %.2f×, throughput %.2f×",
			cs, fr.P99Ms, fr.Throughput, best.Controller, strings.Join(static, ", "), best.P99Ms, best.Throughput, fr.P99Ms/best.P99Ms, fr.Throughput/best.Throughput))
	}
	return out
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/moirai-go/moirai/bench"
)

// dagorSuite is the name of the suite of admission across services, whose
// rows are success rates per feed rate instead of ratios to a normal run.
const dagorSuite = "dagor"

// splitDagor separates the dagor suite's rows from the others.
func splitDagor(rows []bench.Row) (others, dagor []bench.Row) {
	for _, r := range rows {
		if r.Suite == dagorSuite {
			dagor = append(dagor, r)
		} else {
			others = append(others, r)
		}
	}
	return others, dagor
}

// dagorTable writes the dagor suite's rows for a terminal.
func dagorTable(w io.Writer, rows []bench.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tFEED\tCONTROLLER\tSUCCESS\tOPTIMAL\tOF_OPTIMAL\tWASTED\tBY_CALLS(1/2/3/4)\tSTATUS")
	for _, r := range rows {
		cells := []string{oneLine(r.Case), fmtFeed(r.FeedRatio), oneLine(r.Controller)}
		if r.Error != "" {
			cells = append(cells, "-", "-", "-", "-", "-", oneLine("FAILED: "+r.Error))
		} else {
			cells = append(cells, fmtPct(r.SuccessRate), fmtPct(r.OptimalSuccessRate), fmtOfOptimal(r), fmtPct(r.WastedWork), fmtByCalls(r), "ok")
		}
		for i, c := range cells {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fmtFeed(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) + "×" }

func fmtOfOptimal(r bench.Row) string {
	if r.OptimalSuccessRate <= 0 {
		return "–"
	}
	return fmtNorm(r.SuccessRate / r.OptimalSuccessRate)
}

func fmtByCalls(r bench.Row) string {
	if len(r.SuccessByCalls) == 0 {
		return "–"
	}
	parts := make([]string, len(r.SuccessByCalls))
	for i, x := range r.SuccessByCalls {
		parts[i] = fmtPct(x)
	}
	return strings.Join(parts, "/")
}

// dagorKey addresses a row of the dagor suite.
type dagorKey struct {
	cs, ctl string
	feed    float64
}

func indexDagor(rows []bench.Row) map[dagorKey]bench.Row {
	m := map[dagorKey]bench.Row{}
	for _, r := range rows {
		m[dagorKey{r.Case, r.Controller, r.FeedRatio}] = r
	}
	return m
}

// baseOf is a controller's name without its setting: "codel" for
// "codel@10ms/100ms".
func baseOf(ctl string) string {
	b, _, _ := strings.Cut(ctl, "@")
	return b
}

// settingOf is the setting part of a tuned controller's name, "default"
// for a controller at its default.
func settingOf(ctl string) string {
	if _, s, ok := strings.Cut(ctl, "@"); ok {
		return s
	}
	return "default"
}

// tunedBases returns the controllers some rows run at a setting
// (NAME@SETTING), in the order they first appear.
func tunedBases(rows []bench.Row) []string {
	var out []string
	for _, r := range rows {
		if b := baseOf(r.Controller); b != r.Controller && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// bestOf returns the row of the best-tuned base on a case at a feed: the
// highest success rate among base's rows at its default and at every
// setting, the default winning ties.
func bestOf(rows []bench.Row, base, cs string, feed float64) (bench.Row, bool) {
	var best bench.Row
	found := false
	for _, r := range rows {
		if r.Case != cs || r.FeedRatio != feed || r.Error != "" || baseOf(r.Controller) != base {
			continue
		}
		if !found || r.SuccessRate > best.SuccessRate || (r.SuccessRate == best.SuccessRate && r.Controller == base) {
			best, found = r, true
		}
	}
	return best, found
}

// spread is (max − min) / max of the success rates of the tasks making 1
// to 4 calls: 0 when the workload's tasks fare alike.
func spread(r bench.Row) (float64, bool) {
	if len(r.SuccessByCalls) == 0 {
		return 0, false
	}
	lo, hi := slices.Min(r.SuccessByCalls), slices.Max(r.SuccessByCalls)
	if hi <= 0 {
		return 0, false
	}
	return (hi - lo) / hi, true
}

// DagorTargets checks the dagor suite's rows against the mechanism's
// targets: dagor's success rate at least 0.95 × the optimum on
// M1…M4 at 2× and 4× overload; at least 1.5 × codel's on M3 and M4 at 2×
// and 4×, against codel at its default and at its best-tuned setting; in
// the mixed workload, success rates of tasks with 1 to 4 calls within 10 %
// of each other; and the anchor of the codel baseline, the DAGOR paper's
// shape: codel within 10 % of dagor's success rate on M1 at 2× and 4×.
// It returns one line per check, each starting "met" or "missed".
func DagorTargets(rows []bench.Row) []string {
	idx := indexDagor(rows)
	var out []string
	for _, cs := range []string{"M1", "M2", "M3", "M4"} {
		for _, f := range []float64{2, 4} {
			r, ok := idx[dagorKey{cs, "dagor", f}]
			if !ok || r.Error != "" || r.OptimalSuccessRate <= 0 {
				continue
			}
			q := r.SuccessRate / r.OptimalSuccessRate
			out = append(out, fmt.Sprintf("%s dagor on %s at %g×: %.2f of the optimum (target ≥ 0.95)", metWord(q >= 0.95), cs, f, q))
		}
	}
	tuned := slices.Contains(tunedBases(rows), "codel")
	for _, f := range []float64{2, 4} {
		for _, cs := range []string{"M3", "M4"} {
			d, ok := idx[dagorKey{cs, "dagor", f}]
			if !ok || d.Error != "" {
				continue
			}
			against := []string{"codel"}
			if tuned {
				against = append(against, "best")
			}
			for _, which := range against {
				c, ok := idx[dagorKey{cs, "codel", f}]
				name := "codel (default)"
				if which == "best" {
					c, ok = bestOf(rows, "codel", cs, f)
					name = "the best-tuned codel (" + c.Controller + ")"
				}
				if !ok || c.Error != "" {
					continue
				}
				if c.SuccessRate <= 0 {
					out = append(out, fmt.Sprintf("%s dagor on %s at %g×: %s success where %s has none (target ≥ 1.5 ×)", metWord(d.SuccessRate > 0), cs, f, fmtPct(d.SuccessRate), name))
					continue
				}
				q := d.SuccessRate / c.SuccessRate
				out = append(out, fmt.Sprintf("%s dagor on %s at %g×: %.2f × the success rate of %s (target ≥ 1.5)", metWord(q >= 1.5), cs, f, q, name))
			}
		}
	}
	for _, f := range []float64{2, 4} {
		r, ok := idx[dagorKey{"mixed", "dagor", f}]
		if !ok || r.Error != "" {
			continue
		}
		if s, ok := spread(r); ok {
			out = append(out, fmt.Sprintf("%s dagor on mixed at %g×: success by calls %s, spread %.0f %% (target ≤ 10 %%)", metWord(s <= 0.1), f, fmtByCalls(r), 100*s))
		}
	}
	for _, f := range []float64{2, 4} {
		d, ok := idx[dagorKey{"M1", "dagor", f}]
		if !ok || d.Error != "" || d.SuccessRate <= 0 {
			continue
		}
		c, ok := idx[dagorKey{"M1", "codel", f}]
		if ok && c.Error == "" {
			q := c.SuccessRate / d.SuccessRate
			out = append(out, fmt.Sprintf("%s anchor of codel (default) on M1 at %g×: %s against dagor's %s, %.2f of it (the DAGOR paper: all alike on M1; target within 10 %%)", metWord(math.Abs(q-1) <= 0.1), f, fmtPct(c.SuccessRate), fmtPct(d.SuccessRate), q))
		}
		if c, ok := bestOf(rows, "codel", "M1", f); ok && tuned {
			q := c.SuccessRate / d.SuccessRate
			out = append(out, fmt.Sprintf("%s anchor of the best-tuned codel (%s) on M1 at %g×: %s against dagor's %s, %.2f of it (target within 10 %%)", metWord(math.Abs(q-1) <= 0.1), c.Controller, f, fmtPct(c.SuccessRate), fmtPct(d.SuccessRate), q))
		}
	}
	return out
}

func metWord(ok bool) string {
	if ok {
		return "met:"
	}
	return "missed:"
}

// markdownDagor writes the dagor suite's section of RESULTS.md: per
// workload, the success rate of each controller at each feed rate against
// the optimum, the wasted work at M, and the check against the targets.
func markdownDagor(p func(string, ...any), r *bench.Results, rows []bench.Row) {
	p("An entry service A calls a service M of fixed capacity C x times per task (workload *Mx*; *mixed* draws x from 1 to 4 per task); ")
	p("each runs in its own process and they talk gRPC over loopback. The *feed* is the task rate over f_sat, the rate at which M saturates for the workload; ")
	p("the *optimum* success rate is the share of the calls the measured tasks asked for that M could complete at its measured saturated rate (min(1, f_sat / f) with f_sat measured), ")
	p("and each cell gives a controller's success rate with its share of the optimum in brackets. *Wasted work* is the share of M's completed calls that belonged to tasks that failed anyway.\n\n")
	markdownParams(p, r)
	var cases, ctls []string
	var feeds []float64
	for _, row := range rows {
		if !slices.Contains(cases, row.Case) {
			cases = append(cases, row.Case)
		}
		if !slices.Contains(ctls, row.Controller) && baseOf(row.Controller) == row.Controller {
			ctls = append(ctls, row.Controller)
		}
		if !slices.Contains(feeds, row.FeedRatio) {
			feeds = append(feeds, row.FeedRatio)
		}
	}
	slices.Sort(feeds)
	idx := indexDagor(rows)
	cell := func(k dagorKey, f func(bench.Row) string) string {
		row, ok := idx[k]
		switch {
		case !ok:
			return "–"
		case row.Error != "":
			return "failed"
		}
		return f(row)
	}
	// The controllers run at settings (NAME@SETTING) get a column each
	// with their best-tuned row, the setting named in the cell, beside the
	// column of their default.
	bases := tunedBases(rows)
	header := func(first string) {
		p("| %s | optimum |", first)
		for _, c := range ctls {
			p(" %s |", mdCode(c))
		}
		for _, b := range bases {
			p(" %s best-tuned |", mdCode(b))
		}
		p("\n|--:|--:|")
		for range len(ctls) + len(bases) {
			p("--:|")
		}
		p("\n")
	}
	best := func(cs string, f float64, show func(bench.Row) string) {
		for _, b := range bases {
			r, ok := bestOf(rows, b, cs, f)
			if !ok {
				p(" – |")
				continue
			}
			p(" %s at %s |", show(r), mdText(settingOf(r.Controller)))
		}
	}
	for _, cs := range cases {
		p("### Workload %s: success rate\n\n", mdCode(cs))
		header("feed")
		for _, f := range feeds {
			// Every controller meets the same arrivals at a feed (one seed),
			// so the rows of a feed share their optimum.
			opt := "–"
			for _, c := range ctls {
				if r, ok := idx[dagorKey{cs, c, f}]; ok && r.Error == "" && r.OptimalSuccessRate > 0 {
					opt = fmtPct(r.OptimalSuccessRate)
					break
				}
			}
			p("| %s | %s |", fmtFeed(f), opt)
			for _, c := range ctls {
				p(" %s |", cell(dagorKey{cs, c, f}, successCell))
			}
			best(cs, f, successCell)
			p("\n")
		}
		p("\nWasted work at M:\n\n")
		header("feed")
		for _, f := range feeds {
			p("| %s | – |", fmtFeed(f))
			for _, c := range ctls {
				p(" %s |", cell(dagorKey{cs, c, f}, func(r bench.Row) string { return fmtPct(r.WastedWork) }))
			}
			best(cs, f, func(r bench.Row) string { return fmtPct(r.WastedWork) })
			p("\n")
		}
		if cs == "mixed" {
			p("\nSuccess rate of the mixed workload's tasks by their number of calls to M (1/2/3/4):\n\n")
			header("feed")
			for _, f := range feeds {
				p("| %s | – |", fmtFeed(f))
				for _, c := range ctls {
					p(" %s |", cell(dagorKey{cs, c, f}, fmtByCalls))
				}
				best(cs, f, fmtByCalls)
				p("\n")
			}
		}
		p("\n")
	}
	for _, b := range bases {
		markdownSweep(p, rows, b, cases, feeds)
	}
	if t := DagorTargets(rows); len(t) > 0 {
		p("### Targets of %s\n\n", mdCode(dagorSuite))
		for _, line := range t {
			p("- %s\n", mdText(line))
		}
		p("\n")
	}
}

func successCell(r bench.Row) string {
	return fmtPct(r.SuccessRate) + " (" + fmtOfOptimal(r) + ")"
}

// settingForm says what a tunable controller's setting is made of.
func settingForm(base string) string {
	switch base {
	case "random":
		return "WINDOW/THRESHOLD (its detection's window and queueing-time threshold)"
	case "sre":
		return "K (the multiplier of the accepted requests)"
	}
	return "TARGET/INTERVAL"
}

// markdownSweep writes the success rates of a tunable controller at each
// of its settings, the best of each column in bold.
func markdownSweep(p func(string, ...any), rows []bench.Row, base string, cases []string, feeds []float64) {
	var settings []string
	for _, r := range rows {
		if baseOf(r.Controller) == base && !slices.Contains(settings, r.Controller) {
			settings = append(settings, r.Controller)
		}
	}
	type col struct {
		cs string
		f  float64
	}
	var cols []col
	for _, cs := range cases {
		for _, f := range feeds {
			if _, ok := bestOf(rows, base, cs, f); ok {
				cols = append(cols, col{cs, f})
			}
		}
	}
	if len(settings) < 2 || len(cols) == 0 {
		return
	}
	idx := indexDagor(rows)
	p("### Settings of %s: success rate\n\n", mdCode(base))
	p("Each setting is %s; the best of each column is in bold.\n\n| setting |", settingForm(base))
	for _, c := range cols {
		p(" %s %s |", mdText(c.cs), fmtFeed(c.f))
	}
	p("\n|---|")
	for range cols {
		p("--:|")
	}
	p("\n")
	for _, st := range settings {
		p("| %s |", mdText(settingOf(st)))
		for _, c := range cols {
			r, ok := idx[dagorKey{c.cs, st, c.f}]
			switch {
			case !ok:
				p(" – |")
			case r.Error != "":
				p(" failed |")
			default:
				b, _ := bestOf(rows, base, c.cs, c.f)
				if b.Controller == st {
					p(" **%s** |", fmtPct(r.SuccessRate))
				} else {
					p(" %s |", fmtPct(r.SuccessRate))
				}
			}
		}
		p("\n")
	}
	p("\n")
}

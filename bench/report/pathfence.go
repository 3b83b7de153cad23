package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// pathfenceSuite is the name of the suite of path fences, whose rows are
// per path of the shared service rather than normalized.
const pathfenceSuite = "pathfence"

// pathOrder is the order of a case's paths in tables and figures.
var pathOrder = []string{"unaffected", "affected", "local"}

// splitPathfence separates the pathfence suite's rows from the others.
func splitPathfence(rows []bench.Row) (others, pf []bench.Row) {
	for _, r := range rows {
		if r.Suite == pathfenceSuite {
			pf = append(pf, r)
		} else {
			others = append(others, r)
		}
	}
	return others, pf
}

// pathfenceTable writes the pathfence suite's rows for a terminal.
func pathfenceTable(w io.Writer, rows []bench.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tCONTROLLER\tPATH\tMEAN_MS\tP99_MS\tDROPPED\tTHROUGHPUT\tPERMITS")
	for _, r := range rows {
		cells := []string{oneLine(r.Case), oneLine(r.Controller), oneLine(r.Path)}
		if r.Error != "" {
			cells = append(cells, "-", "-", "-", "-", oneLine("FAILED: "+r.Error))
		} else {
			cells = append(cells, fmtMs(r.MeanMs), fmtMs(r.P99Ms), fmtDropped(r), fmtRate(r.Throughput), fmtPermits(r))
		}
		for i, c := range cells {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fmtPermits(r bench.Row) string {
	if r.Permits <= 0 {
		return "–"
	}
	return strconv.Itoa(r.Permits)
}

func fmtDropped(r bench.Row) string {
	if r.Sent <= 0 {
		return strconv.Itoa(r.Dropped)
	}
	return fmt.Sprintf("%d (%s)", r.Dropped, fmtPct(float64(r.Dropped)/float64(r.Sent)))
}

type pathKey struct{ cs, ctl, path string }

func indexPathfence(rows []bench.Row) map[pathKey]bench.Row {
	m := map[pathKey]bench.Row{}
	for _, r := range rows {
		if r.Error == "" {
			m[pathKey{r.Case, r.Controller, r.Path}] = r
		}
	}
	return m
}

// totalThroughput is a controller's throughput over every path of a case.
func totalThroughput(idx map[pathKey]bench.Row, cs, ctl string) (float64, bool) {
	sum, n := 0.0, 0
	for _, p := range pathOrder {
		if r, ok := idx[pathKey{cs, ctl, p}]; ok {
			sum += r.Throughput
			n++
		}
	}
	return sum, n == len(pathOrder)
}

// PathfenceTargets checks the pathfence suite's rows against the
// mechanism's targets: in the millibottleneck case, pathfence-sct's p99 on the
// unaffected path at least 80 % lower than shared's and its dropped
// requests at least 90 % fewer, the affected path no worse than under
// shared (p99 within 5 %, no more drops, no less throughput than 95 % of
// shared's); in the peak case, pathfence-sct's total throughput within 5 %
// of the best fixed reservation of the sweep (fixed-K and pathfence). It
// returns one line per check, each starting "met" or "missed".
func PathfenceTargets(rows []bench.Row) []string {
	idx := indexPathfence(rows)
	var out []string
	const mb = "millibottleneck"
	sct, sh := idx[pathKey{mb, "pathfence-sct", "unaffected"}], idx[pathKey{mb, "shared", "unaffected"}]
	_, okS := idx[pathKey{mb, "pathfence-sct", "unaffected"}]
	_, okH := idx[pathKey{mb, "shared", "unaffected"}]
	if okS && okH && sh.P99Ms > 0 {
		cut := 1 - sct.P99Ms/sh.P99Ms
		out = append(out, fmt.Sprintf("%s unaffected path p99 %.1f ms vs shared %.1f ms: %.0f %% lower (target ≥ 80 %%)",
			metWord(cut >= 0.8), sct.P99Ms, sh.P99Ms, 100*cut))
		if sh.Dropped > 0 {
			fewer := 1 - float64(sct.Dropped)/float64(sh.Dropped)
			out = append(out, fmt.Sprintf("%s unaffected path dropped %d vs shared %d: %.0f %% fewer (target ≥ 90 %%)",
				metWord(fewer >= 0.9), sct.Dropped, sh.Dropped, 100*fewer))
		} else {
			out = append(out, fmt.Sprintf("%s unaffected path dropped %d vs shared 0: shared dropped nothing to improve on",
				metWord(sct.Dropped == 0), sct.Dropped))
		}
	}
	a, okA := idx[pathKey{mb, "pathfence-sct", "affected"}]
	b, okB := idx[pathKey{mb, "shared", "affected"}]
	if okA && okB {
		ok := a.P99Ms <= 1.05*b.P99Ms && a.Dropped <= b.Dropped && a.Throughput >= 0.95*b.Throughput
		out = append(out, fmt.Sprintf("%s affected path no worse than shared: p99 %.1f vs %.1f ms, dropped %d vs %d, throughput %.1f vs %.1f/s",
			metWord(ok), a.P99Ms, b.P99Ms, a.Dropped, b.Dropped, a.Throughput, b.Throughput))
	}
	const pk = "peak"
	if t, ok := totalThroughput(idx, pk, "pathfence-sct"); ok {
		best, bestName := 0.0, ""
		var ctls []string
		for _, r := range rows {
			if r.Case == pk && (r.Controller == "pathfence" || strings.HasPrefix(r.Controller, "fixed-")) && !slices.Contains(ctls, r.Controller) {
				ctls = append(ctls, r.Controller)
			}
		}
		for _, c := range ctls {
			if x, ok := totalThroughput(idx, pk, c); ok && x > best {
				best, bestName = x, c
			}
		}
		if bestName != "" {
			out = append(out, fmt.Sprintf("%s peak throughput %.0f/s vs the best fixed reservation (%s) %.0f/s: %.1f %% (target ≥ 95 %%)",
				metWord(t >= 0.95*best), t, bestName, best, 100*t/best))
		}
	}
	return out
}

// PathfenceBaselines compares pathfence-sct with the per-service limits
// at their best: the static controller (Vegas at its library's defaults),
// Vegas at the settings of its sweep (static@ALPHA/BETA/SMOOTHING) and
// the static limits of the sweep (limit-N), the best of them on the
// unaffected path in the millibottleneck case (the fewest dropped, then
// the lowest p99: a limit that rejects more has a lower p99 of what it
// serves) and on the total throughput at peak, and with the best fixed
// split (fixed-K, pathfence) on the unaffected path. One line per
// comparison.
func PathfenceBaselines(rows []bench.Row) []string {
	idx := indexPathfence(rows)
	var limits, fixed []string
	for _, r := range rows {
		switch {
		case (r.Controller == "static" || strings.HasPrefix(r.Controller, "static@") || strings.HasPrefix(r.Controller, "limit-")) && !slices.Contains(limits, r.Controller):
			limits = append(limits, r.Controller)
		case (r.Controller == "pathfence" || strings.HasPrefix(r.Controller, "fixed-")) && !slices.Contains(fixed, r.Controller):
			fixed = append(fixed, r.Controller)
		}
	}
	var out []string
	const mb, pk = "millibottleneck", "peak"
	sct, ok := idx[pathKey{mb, "pathfence-sct", "unaffected"}]
	for _, set := range []struct {
		what string
		ctls []string
	}{{"per-service limit", limits}, {"fixed split", fixed}} {
		best, found := bench.Row{}, false
		for _, c := range set.ctls {
			r, okR := idx[pathKey{mb, c, "unaffected"}]
			if okR && (!found || r.Dropped < best.Dropped || (r.Dropped == best.Dropped && r.P99Ms < best.P99Ms)) {
				best, found = r, true
			}
		}
		if ok && found && best.P99Ms > 0 {
			out = append(out, fmt.Sprintf("millibottleneck: pathfence-sct's unaffected path p99 %.1f ms, dropped %d; the best %s (%s, of %s: fewest dropped, then lowest p99) %.1f ms, dropped %d: pathfence-sct's p99 %.2f× its",
				sct.P99Ms, sct.Dropped, set.what, best.Controller, strings.Join(set.ctls, ", "), best.P99Ms, best.Dropped, sct.P99Ms/best.P99Ms))
		}
	}
	if t, okT := totalThroughput(idx, pk, "pathfence-sct"); okT {
		best, bestName := 0.0, ""
		for _, c := range limits {
			if x, okX := totalThroughput(idx, pk, c); okX && x > best {
				best, bestName = x, c
			}
		}
		if bestName != "" {
			out = append(out, fmt.Sprintf("peak: pathfence-sct's throughput %.0f/s; the best per-service limit (%s) %.0f/s: %.1f %% of it",
				t, bestName, best, 100*t/best))
		}
	}
	return out
}

// markdownPathfence writes the pathfence suite's section of RESULTS.md.
func markdownPathfence(p func(string, ...any), r *bench.Results, rows []bench.Row) {
	p("A shared service U with a bounded worker pool calls downstream D1 (the *affected* path, where stalls are injected) or D2 (the *unaffected* path), ")
	p("or serves a request itself (*local*); U, D1 and D2 each run in their own process and talk gRPC over loopback. ")
	p("Latencies are those of the requests that succeeded; *dropped* counts the requests that timed out or were rejected, of those sent after the warm-up; ")
	p("throughput is successes per second.\n\n")
	markdownParams(p, r)
	var cases []string
	for _, row := range rows {
		if !slices.Contains(cases, row.Case) {
			cases = append(cases, row.Case)
		}
	}
	for _, cs := range cases {
		p("### Case %s\n\n", mdCode(cs))
		p("| controller | path | mean (ms) | p99 (ms) | dropped | throughput (/s) | permits at the end |\n|---|---|--:|--:|--:|--:|--:|\n")
		for _, row := range rows {
			if row.Case != cs {
				continue
			}
			if row.Error != "" {
				p("| %s | %s | – | – | – | – | **failed**: %s |\n", mdCode(row.Controller), mdCode(row.Path), mdText(row.Error))
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", mdCode(row.Controller), mdCode(row.Path), fmtMs(row.MeanMs), fmtMs(row.P99Ms),
				fmtDropped(row), fmtRate(row.Throughput), fmtPermits(row))
		}
		if hasPathRuns(r, cs) {
			p("\n![%s: p99 latency per path over time](bench/pathfence-%s.svg)\n", mdText(cs), slug(cs))
			p("\n*Figure: p99 latency of each path over time, one line per controller (the sweeps of fixed-K and of static's Vegas settings left out); shaded: D1's stalls. ")
			p("Written by `moirai bench report --figures docs/bench`.*\n")
		}
		p("\n")
	}
	if b := PathfenceBaselines(rows); len(b) > 0 {
		p("### Baselines at their best\n\n")
		for _, line := range b {
			p("- %s\n", mdText(line))
		}
		p("\n")
	}
	if t := PathfenceTargets(rows); len(t) > 0 {
		p("### Targets\n\n")
		for _, line := range t {
			p("- %s\n", mdText(line))
		}
		p("\n")
	}
}

// stallEvent is the kind of a run's event that marks a stall of the
// downstream, shaded in the pathfence figure.
const stallEvent = "stall"

func hasPathRuns(r *bench.Results, cs string) bool {
	return slices.ContainsFunc(r.Runs, func(run bench.Run) bool { return run.Case == cs && pathfenceDrawn(&run) })
}

// pathfenceDrawn reports whether the pathfence figure draws run: a run with
// a path's series, the sweeps of fixed reservations and of static's
// settings left out (they would crowd the figure).
func pathfenceDrawn(run *bench.Run) bool {
	return run.Path != "" && len(run.Series) > 0 && !strings.HasPrefix(run.Controller, "fixed-") && !strings.HasPrefix(run.Controller, "static@")
}

// PathfenceFigures returns the SVG figure of each case of r's pathfence
// runs, by the file name the Markdown links to (pathfence-CASE.svg).
func PathfenceFigures(r *bench.Results) map[string]string {
	out := map[string]string{}
	pal := palette(r)
	for _, s := range group(r) {
		if s.Name != pathfenceSuite {
			continue
		}
		for _, c := range s.Cases {
			if svg := pathfenceFigure(c, pal, c.Case+" (suite pathfence): p99 latency per path over time"); svg != "" {
				out["pathfence-"+slug(c.Case)+".svg"] = svg
			}
		}
	}
	return out
}

// pathfenceFigure draws a pathfence case's runs: one panel per path, the
// p99 latency of each bucket on a log axis, one line per controller (the
// sweeps of fixed-K and static@… left out), and the stalls of D1 shaded. It returns "" when the case has no series.
func pathfenceFigure(c *caseGroup, pal map[string]style, title string) string {
	byPath := map[string][]*bench.Run{}
	var tmax time.Duration
	p99Min, p99Max := math.Inf(1), 0.0
	var stalls []bench.Event
	for _, run := range c.Runs {
		if !pathfenceDrawn(run) {
			continue
		}
		byPath[run.Path] = append(byPath[run.Path], run)
		tmax = max(tmax, run.Duration, run.Series[len(run.Series)-1].T+step(run))
		for _, pt := range run.Series {
			if pt.P99Ms > 0 {
				p99Min, p99Max = min(p99Min, pt.P99Ms), max(p99Max, pt.P99Ms)
			}
		}
		if len(stalls) == 0 {
			for _, e := range run.Events {
				if e.Kind == stallEvent {
					stalls = append(stalls, e)
				}
			}
		}
	}
	var paths []string
	for _, p := range pathOrder {
		if len(byPath[p]) > 0 {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 || p99Max == 0 {
		return ""
	}
	xmax := tmax.Seconds()
	x := func(t time.Duration) float64 { return padL + t.Seconds()/xmax*plotW }
	logLo, logHi := math.Floor(math.Log10(p99Min)), math.Ceil(math.Log10(p99Max))
	if logHi <= logLo {
		logHi = logLo + 1
	}
	// Legend: the controllers, in the order of the first path's runs.
	var ctls []string
	for _, run := range byPath[paths[0]] {
		if !slices.Contains(ctls, run.Controller) {
			ctls = append(ctls, run.Controller)
		}
	}
	styleOf := func(ctl string) style {
		if s, ok := pal[ctl]; ok {
			return s
		}
		return style{Color: colorOther, Width: 1.5}
	}
	const top0 = 46.0
	lx, ly := padL, top0
	w := &svgWriter{}
	var legend svgWriter
	for _, ctl := range append(slices.Clone(ctls), "D1 stalled") {
		width := 34 + charW*float64(len([]rune(ctl))) + 16
		if lx+width > figW-padR && lx > padL {
			lx, ly = padL, ly+legendRowH
		}
		if ctl == "D1 stalled" {
			legend.f(`<rect x="%s" y="%s" width="26" height="10" fill="%s" fill-opacity="0.18"/>`, num(lx), num(ly-9), colorInjection)
		} else {
			s := styleOf(ctl)
			legend.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`, num(lx), num(ly-4), num(lx+26), num(ly-4), s.Color, num(s.Width+0.6), dashAttr(s.Dash))
		}
		legend.f(`<text x="%s" y="%s">%s</text>`, num(lx+34), num(ly), esc(ctl))
		lx += width
	}
	panelTop := ly + 24
	height := panelTop + float64(len(paths))*(panelH+panelGap) + 40
	w.f(`<svg class="fig" viewBox="0 0 %s %s" width="%s" height="%s" role="img" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="12" fill="%s">`,
		num(figW), num(height), num(figW), num(height), colorText)
	w.f(`<title>%s</title>`, esc(title))
	w.f(`<text x="%s" y="22" font-size="15" font-weight="600">%s</text>`, num(padL), esc(title))
	w.WriteString(legend.String())
	xstep := niceStep(xmax, 10)
	xticks := ticks(0, xmax, xstep)
	p99Ticks := logTicks(logLo, logHi)
	var bottom float64
	for i, path := range paths {
		top := panelTop + float64(i)*(panelH+panelGap)
		bot := top + panelH
		bottom = bot
		y := func(v float64) float64 {
			l := min(max(math.Log10(v), logLo), logHi)
			return bot - (l-logLo)/(logHi-logLo)*panelH
		}
		for _, e := range stalls {
			x0, x1 := x(e.T), x(e.T+e.Delay)
			w.f(`<rect class="stall" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.18"><title>D1 stalled %v at %.2f s</title></rect>`,
				num(x0), num(top), num(max(x1-x0, 1)), num(panelH), colorInjection, e.Delay, e.T.Seconds())
		}
		w.f(`<g class="grid" stroke="%s" stroke-width="1">`, colorGrid)
		for _, t := range xticks {
			xx := padL + t/xmax*plotW
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(xx), num(top), num(xx), num(bot))
		}
		for _, v := range p99Ticks {
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(padL), num(y(v)), num(figW-padR), num(y(v)))
		}
		w.f(`</g>`)
		w.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s" stroke-width="1"/>`, num(padL), num(top), num(plotW), num(panelH), colorAxis)
		w.f(`<g class="ticks" text-anchor="end">`)
		for _, v := range p99Ticks {
			w.f(`<text x="%s" y="%s">%s</text>`, num(padL-6), num(y(v)+4), strconv.FormatFloat(v, 'f', -1, 64))
		}
		w.f(`</g>`)
		cy := (top + bot) / 2
		w.f(`<text x="%s" y="%s" text-anchor="middle" font-weight="600" transform="rotate(-90 %s %s)">%s path, p99 (ms)</text>`,
			num(padL-70), num(cy), num(padL-70), num(cy), esc(path))
		for _, run := range byPath[path] {
			s := styleOf(run.Controller)
			if d := pathData(run, x, y, true); d != "" {
				w.f(`<path class="series p99" data-controller="%s" data-path="%s" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s><title>%s, %s path: p99 latency</title></path>`,
					esc(run.Controller), esc(path), d, s.Color, num(s.Width), dashAttr(s.Dash), esc(run.Controller), esc(path))
			}
		}
	}
	w.f(`<g class="ticks" text-anchor="middle">`)
	for _, t := range xticks {
		xx := padL + t/xmax*plotW
		w.f(`<text x="%s" y="%s">%s</text>`, num(xx), num(bottom+17), tickLabel(t, xstep))
	}
	w.f(`</g>`)
	w.f(`<text x="%s" y="%s" text-anchor="middle" font-weight="600">time since the start of the run (s)</text>`, num(padL+plotW/2), num(bottom+35))
	w.f(`</svg>`)
	return w.String()
}

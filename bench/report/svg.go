package report

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// style is how a controller's runs are drawn.
type style struct {
	Color string
	Dash  string // stroke-dasharray, "" for solid
	Width float64
}

// colors is the fixed palette of the controllers' lines: Okabe and Ito's
// colour-blind-safe colours (without yellow, too light on white), then
// Tol's. "none" is black and "normal" a dashed grey.
var colors = []string{
	"#0072B2", // blue
	"#D55E00", // vermillion
	"#009E73", // bluish green
	"#CC79A7", // reddish purple
	"#E69F00", // orange
	"#56B4E9", // sky blue
	"#882255", // wine
	"#117733", // green
	"#999933", // olive
	"#332288", // indigo
}

// The colours of event markers.
const (
	colorCulpritCancel = "#009E73"
	colorVictimCancel  = "#D55E00"
	colorReject        = "#555555"
	colorOther         = "#999999"
	colorInjection     = "#B8006B"
	colorGrid          = "#e3e3e3"
	colorAxis          = "#444444"
	colorText          = "#222222"
)

// palette assigns each controller of r a style, in the order controllers
// first appear, so a controller has the same colour in every figure.
func palette(r *bench.Results) map[string]style {
	pal := map[string]style{
		"normal": {Color: "#8c8c8c", Dash: "6 4", Width: 1.6},
		"none":   {Color: "#000000", Width: 1.8},
	}
	i := 0
	add := func(name string) {
		if _, ok := pal[name]; ok {
			return
		}
		s := style{Color: colors[i%len(colors)], Width: 1.8}
		if i >= len(colors) {
			s.Dash = "2 3"
		}
		pal[name] = s
		i++
	}
	for _, row := range r.Rows {
		add(row.Controller)
	}
	for _, run := range r.Runs {
		add(run.Controller)
	}
	return pal
}

// Geometry of a figure, in SVG user units (pixels at 100%).
const (
	figW       = 960.0
	padL       = 128.0 // y tick labels and lane labels
	padR       = 28.0
	plotW      = figW - padL - padR
	panelH     = 190.0
	panelGap   = 16.0
	laneH      = 16.0
	legendRowH = 18.0
	charW      = 6.6 // estimated width of a character at 12px
)

// svgWriter accumulates SVG markup.
type svgWriter struct{ strings.Builder }

func (w *svgWriter) f(format string, args ...any) { fmt.Fprintf(&w.Builder, format, args...) }

// esc escapes text for an SVG text node or attribute value.
func esc(s string) string { return html.EscapeString(s) }

// num formats a coordinate.
func num(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// figure draws the time series of a case's runs: the light requests'
// throughput and p99 latency on a shared time axis, one line per run, the
// culprit's injection, and a lane of the controller's actions per run.
// It returns "" when the case has no run with a series.
func figure(c *caseGroup, pal map[string]style, title string) string {
	runs := slices.Clone(c.Runs)
	// The reference first, under the others; then "none"; then the rest.
	rank := func(r *bench.Run) int {
		switch r.Controller {
		case "normal":
			return 0
		case "none":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(runs, func(a, b *bench.Run) int { return rank(a) - rank(b) })
	if len(runs) == 0 {
		return ""
	}
	styleOf := func(r *bench.Run) style {
		if s, ok := pal[r.Controller]; ok {
			return s
		}
		return style{Color: colorOther, Width: 1.5}
	}

	// Time axis.
	var tmax time.Duration
	for _, r := range runs {
		tmax = max(tmax, r.Duration)
		if n := len(r.Series); n > 0 {
			tmax = max(tmax, r.Series[n-1].T+step(r))
		}
		for _, e := range r.Events {
			tmax = max(tmax, e.T)
		}
	}
	if tmax <= 0 {
		tmax = time.Second
	}
	xmax := tmax.Seconds()
	x := func(t time.Duration) float64 { return padL + t.Seconds()/xmax*plotW }

	// Value axes.
	var tputMax, p99Min, p99Max float64
	p99Min = math.Inf(1)
	for _, r := range runs {
		for _, p := range r.Series {
			tputMax = max(tputMax, p.Throughput)
			if p.P99Ms > 0 {
				p99Min = min(p99Min, p.P99Ms)
				p99Max = max(p99Max, p.P99Ms)
			}
		}
	}
	tputStep := niceStep(tputMax, 4)
	tputTop := math.Ceil(tputMax/tputStep) * tputStep
	if tputTop <= 0 {
		tputTop, tputStep = 1, 0.25
	}
	if tputTop < tputMax*1.04 { // room above the highest point
		tputTop += tputStep
	}
	logLo, logHi := 0.0, 3.0 // 1 ms to 1 s when there is no data
	if p99Max > 0 {
		logLo = math.Floor(math.Log10(p99Min))
		logHi = math.Ceil(math.Log10(p99Max))
		if logHi <= logLo {
			logHi = logLo + 1
		}
	}

	// Legend: one item per run, then the markers.
	type legendItem struct {
		label string
		draw  func(w *svgWriter, x, y float64) // sample at (x, y): the text's baseline
		width float64
	}
	var items []legendItem
	for _, r := range runs {
		s := styleOf(r)
		label := r.Controller
		if r.Controller == "normal" || !r.WithCulprit {
			label += " (no culprit)"
		}
		items = append(items, legendItem{label: label, draw: func(w *svgWriter, x, y float64) {
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`,
				num(x), num(y-4), num(x+26), num(y-4), s.Color, num(s.Width+0.6), dashAttr(s.Dash))
		}})
	}
	items = append(items,
		legendItem{label: "culprit injected", draw: func(w *svgWriter, x, y float64) {
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/>`,
				num(x+13), num(y-12), num(x+13), num(y+3), colorInjection)
		}},
		legendItem{label: "culprit cancelled", draw: func(w *svgWriter, x, y float64) { marker(w, "cancel-culprit", x+13, y-4) }},
		legendItem{label: "victim cancelled", draw: func(w *svgWriter, x, y float64) { marker(w, "cancel-victim", x+13, y-4) }},
		legendItem{label: "requests rejected", draw: func(w *svgWriter, x, y float64) { marker(w, "reject", x+13, y-4) }},
	)
	legendTop := 46.0
	lx, ly := padL, legendTop
	type placed struct {
		item legendItem
		x, y float64
	}
	var placedItems []placed
	for i, it := range items {
		it.width = 34 + charW*float64(len([]rune(it.label))) + 16
		// The markers' key starts a row of its own.
		if (lx+it.width > figW-padR || i == len(runs)) && lx > padL {
			lx, ly = padL, ly+legendRowH
		}
		placedItems = append(placedItems, placed{it, lx, ly})
		lx += it.width
	}

	// Vertical layout.
	p1Top := ly + 24
	p1Bot := p1Top + panelH
	p2Top := p1Bot + panelGap
	p2Bot := p2Top + panelH
	var lanes []*bench.Run
	for _, r := range runs {
		if r.Controller != "normal" {
			lanes = append(lanes, r)
		}
	}
	lanesTop := p2Bot + 26
	lanesBot := lanesTop + laneH*float64(len(lanes))
	if len(lanes) == 0 {
		lanesBot = p2Bot
	}
	height := lanesBot + 44

	yTput := func(v float64) float64 { return p1Bot - v/tputTop*panelH }
	yP99 := func(v float64) float64 {
		l := math.Log10(v)
		l = min(max(l, logLo), logHi)
		return p2Bot - (l-logLo)/(logHi-logLo)*panelH
	}

	w := &svgWriter{}
	w.f(`<svg class="fig" viewBox="0 0 %s %s" width="%s" height="%s" role="img" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="12" fill="%s">`,
		num(figW), num(height), num(figW), num(height), colorText)
	w.f(`<title>%s</title>`, esc(title))
	w.f(`<text x="%s" y="22" font-size="15" font-weight="600">%s</text>`, num(padL), esc(title))

	for _, p := range placedItems {
		p.item.draw(w, p.x, p.y)
		w.f(`<text x="%s" y="%s">%s</text>`, num(p.x+34), num(p.y), esc(p.item.label))
	}

	// Grid and axes.
	xstep := niceStep(xmax, 10)
	xticks := ticks(0, xmax, xstep)
	gridBot := p2Bot
	if len(lanes) > 0 {
		gridBot = lanesBot
	}
	w.f(`<g class="grid" stroke="%s" stroke-width="1">`, colorGrid)
	for _, t := range xticks {
		xx := padL + t/xmax*plotW
		w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(xx), num(p1Top), num(xx), num(p1Bot))
		w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(xx), num(p2Top), num(xx), num(p2Bot))
		if len(lanes) > 0 {
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(xx), num(lanesTop), num(xx), num(lanesBot))
		}
	}
	for _, v := range ticks(0, tputTop, tputStep) {
		w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(padL), num(yTput(v)), num(figW-padR), num(yTput(v)))
	}
	p99Ticks := logTicks(logLo, logHi)
	for _, v := range p99Ticks {
		w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(padL), num(yP99(v)), num(figW-padR), num(yP99(v)))
	}
	w.f(`</g>`)

	// Panel frames, tick labels and axis titles.
	for _, pn := range []struct{ top, bot float64 }{{p1Top, p1Bot}, {p2Top, p2Bot}} {
		w.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s" stroke-width="1"/>`,
			num(padL), num(pn.top), num(plotW), num(pn.bot-pn.top), colorAxis)
	}
	w.f(`<g class="ticks" text-anchor="end">`)
	for _, v := range ticks(0, tputTop, tputStep) {
		w.f(`<text x="%s" y="%s">%s</text>`, num(padL-6), num(yTput(v)+4), tickLabel(v, tputStep))
	}
	for _, v := range p99Ticks {
		w.f(`<text x="%s" y="%s">%s</text>`, num(padL-6), num(yP99(v)+4), strconv.FormatFloat(v, 'f', -1, 64))
	}
	w.f(`</g>`)
	axisTitle := func(text string, top, bot float64) {
		cy := (top + bot) / 2
		w.f(`<text x="%s" y="%s" text-anchor="middle" font-weight="600" transform="rotate(-90 %s %s)">%s</text>`,
			num(padL-70), num(cy), num(padL-70), num(cy), esc(text))
	}
	axisTitle("throughput (req/s)", p1Top, p1Bot)
	axisTitle("p99 latency (ms, log)", p2Top, p2Bot)
	if p99Max == 0 {
		w.f(`<text x="%s" y="%s" text-anchor="middle" fill="#555">no latency data</text>`, num(padL+plotW/2), num((p2Top+p2Bot)/2))
	}

	// The lines.
	for _, r := range runs {
		s := styleOf(r)
		ctl := esc(r.Controller)
		if d := pathData(r, x, yTput, false); d != "" {
			w.f(`<path class="series tput" data-controller="%s" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" stroke-linecap="round"%s><title>%s: throughput</title></path>`,
				ctl, d, s.Color, num(s.Width), dashAttr(s.Dash), ctl)
		}
		if d := pathData(r, x, yP99, true); d != "" {
			w.f(`<path class="series p99" data-controller="%s" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" stroke-linecap="round"%s><title>%s: p99 latency</title></path>`,
				ctl, d, s.Color, num(s.Width), dashAttr(s.Dash), ctl)
		}
	}

	// Captions inside the panels, with a halo over the lines.
	const halo = ` stroke="#ffffff" stroke-width="3" paint-order="stroke"`
	w.f(`<text x="%s" y="%s" font-size="11" fill="#555"%s>light requests completed per second</text>`, num(padL+6), num(p1Top+14), halo)
	w.f(`<text x="%s" y="%s" font-size="11" fill="#555"%s>p99 latency of the light requests that completed in each interval (gap: none completed)</text>`, num(padL+6), num(p2Top+14), halo)

	// The lanes of actions.
	if len(lanes) > 0 {
		w.f(`<text x="%s" y="%s" font-size="11" fill="#555">controller actions per run (hover a marker for its note)</text>`, num(padL), num(lanesTop-8))
		w.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s" stroke-width="1"/>`,
			num(padL), num(lanesTop), num(plotW), num(lanesBot-lanesTop), colorAxis)
		for i, r := range lanes {
			top := lanesTop + laneH*float64(i)
			cy := top + laneH/2
			if i > 0 {
				w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`, num(padL), num(top), num(figW-padR), num(top), colorGrid)
			}
			s := styleOf(r)
			w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"%s/>`, num(padL-22), num(cy), num(padL-8), num(cy), s.Color, dashAttr(s.Dash))
			w.f(`<text x="%s" y="%s" text-anchor="end" font-size="11"><title>%s</title>%s</text>`, num(padL-26), num(cy+4), esc(r.Controller), esc(truncate(r.Controller, 14)))
			w.f(`<g class="events" data-controller="%s">`, esc(r.Controller))
			for _, e := range r.Events {
				if e.Kind == "culprit" {
					continue
				}
				w.f(`<g>`)
				marker(w, e.Kind, x(e.T), cy)
				note := fmt.Sprintf("%s at %.2f s: %s", e.Kind, e.T.Seconds(), e.Kind)
				if e.Note != "" {
					note = fmt.Sprintf("%s at %.2f s: %s", e.Kind, e.T.Seconds(), e.Note)
				}
				w.f(`<title>%s</title></g>`, esc(r.Controller+", "+note))
			}
			w.f(`</g>`)
		}
	}

	// The time axis, at the bottom.
	w.f(`<g class="ticks" text-anchor="middle">`)
	for _, t := range xticks {
		xx := padL + t/xmax*plotW
		w.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`, num(xx), num(gridBot), num(xx), num(gridBot+4), colorAxis)
		w.f(`<text x="%s" y="%s">%s</text>`, num(xx), num(gridBot+17), tickLabel(t, xstep))
	}
	w.f(`</g>`)
	w.f(`<text x="%s" y="%s" text-anchor="middle" font-weight="600">time since the start of the run (s)</text>`, num(padL+plotW/2), num(gridBot+35))

	// The culprit's injection, over everything.
	for _, at := range injections(runs) {
		xx := x(at)
		w.f(`<g class="injection"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="5 4"/>`,
			num(xx), num(p1Top), num(xx), num(gridBot), colorInjection)
		anchor, dx := "start", 5.0
		if xx > padL+plotW*0.8 {
			anchor, dx = "end", -5
		}
		w.f(`<text x="%s" y="%s" text-anchor="%s" font-size="11" font-weight="600" fill="%s">culprit injected (%.2f s)</text></g>`,
			num(xx+dx), num(p1Top-5), anchor, colorInjection, at.Seconds())
	}
	w.f(`</svg>`)
	return w.String()
}

// step returns the bucket width of a run's series.
func step(r *bench.Run) time.Duration {
	if r.SeriesStep > 0 {
		return r.SeriesStep
	}
	if len(r.Series) > 1 {
		return r.Series[1].T - r.Series[0].T
	}
	return 0
}

// pathData returns the d attribute of a run's throughput (p99 false) or p99
// line. A bucket is drawn at its middle; a p99 of zero (no request
// completed) is a gap in the line, an isolated bucket a dot.
func pathData(r *bench.Run, x func(time.Duration) float64, y func(float64) float64, p99 bool) string {
	var b strings.Builder
	half := step(r) / 2
	open := false
	for i, p := range r.Series {
		v := p.Throughput
		if p99 {
			v = p.P99Ms
			if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				open = false
				continue
			}
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			open = false
			continue
		}
		xx, yy := num(x(p.T+half)), num(y(v))
		if open {
			b.WriteString("L" + xx + " " + yy)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("M" + xx + " " + yy)
		open = true
		// A point with no neighbour draws nothing: make it a dot.
		if next := i + 1; next >= len(r.Series) || (p99 && r.Series[next].P99Ms <= 0) {
			b.WriteString("h0.01")
		}
	}
	return b.String()
}

// injections returns the distinct times, to the millisecond, at which the
// runs' culprits were injected.
func injections(runs []*bench.Run) []time.Duration {
	var out []time.Duration
	add := func(t time.Duration) {
		t = t.Round(time.Millisecond)
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, r := range runs {
		if r.WithCulprit && r.InjectedAt > 0 {
			add(r.InjectedAt)
			continue
		}
		for _, e := range r.Events {
			if e.Kind == "culprit" {
				add(e.T)
			}
		}
	}
	slices.Sort(out)
	return out
}

// marker draws the marker of an event kind centred on (x, y).
func marker(w *svgWriter, kind string, x, y float64) {
	switch kind {
	case "cancel-culprit": // filled triangle pointing down
		w.f(`<path class="ev cancel-culprit" d="M%s %sL%s %sL%s %sZ" fill="%s" stroke="#ffffff" stroke-width="0.8"/>`,
			num(x-6), num(y-5), num(x+6), num(y-5), num(x), num(y+6), colorCulpritCancel)
	case "cancel-victim": // cross
		w.f(`<path class="ev cancel-victim" d="M%s %sL%s %sM%s %sL%s %s" stroke="%s" stroke-width="2.4" stroke-linecap="round"/>`,
			num(x-4.5), num(y-4.5), num(x+4.5), num(y+4.5), num(x-4.5), num(y+4.5), num(x+4.5), num(y-4.5), colorVictimCancel)
	case "reject": // hollow square
		w.f(`<rect class="ev reject" x="%s" y="%s" width="8" height="8" fill="#ffffff" stroke="%s" stroke-width="1.6"/>`,
			num(x-4), num(y-4), colorReject)
	default: // small circle
		w.f(`<circle class="ev other" cx="%s" cy="%s" r="3.5" fill="%s"/>`, num(x), num(y), colorOther)
	}
}

// dashAttr returns the stroke-dasharray attribute for a dash pattern.
func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + dash + `"`
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that divides
// span into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*mag*(1+1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// ticks returns the multiples of step in [lo, hi].
func ticks(lo, hi, step float64) []float64 {
	var out []float64
	first := math.Ceil(lo/step - 1e-9)
	for i := first; i*step <= hi+step*1e-9 && len(out) < 100; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		out = append(out, v)
	}
	return out
}

// tickLabel formats a tick value with as many decimals as its step needs.
func tickLabel(v, step float64) string {
	dec := 0
	if step > 0 {
		dec = max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// logTicks returns the ticks of a log axis from 10^lo to 10^hi: the powers
// of ten, and 2 and 5 times them when the axis spans few decades.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for e := lo; e <= hi; e++ {
		d := math.Pow(10, e)
		out = append(out, round(d))
		if hi-lo <= 2 && e < hi {
			out = append(out, round(2*d), round(5*d))
		}
	}
	return out
}

// round removes the floating-point noise of a power of ten.
func round(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 12, 64), 64)
	return v
}

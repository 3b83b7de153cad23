package demo

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// reportBucket is the width of the time series' buckets.
const reportBucket = 100 * time.Millisecond

// WriteReport writes a self-contained HTML page (inline CSS and SVG, no
// scripts, no external assets) of a demo: the two runs side by side, the
// inserts' p99 latency over time in each run against the objective, and
// moirai's decisions with their explanations. s is what [Run] returned;
// with one run only (Config.Only), the page shows that run. Every value is
// escaped: task keys and reasons are data.
func WriteReport(w io.Writer, cfg Config, s Summary) error {
	runs := []*Summary{&s}
	if s.Baseline != nil {
		runs = []*Summary{s.Baseline, &s}
	}
	p := reportPage{SLO: cfg.slo().String(), Duration: cfg.Duration.String(), Rate: cfg.Rate, Seed: cfg.Seed}
	var series []reportSeries
	for _, r := range runs {
		p.Runs = append(p.Runs, reportRun{
			Title:   runTitle(r.Run, cfg.slo()),
			Sent:    r.Sent,
			OK:      r.OK,
			Failed:  r.Failed,
			Shed:    r.Shed,
			P50:     msText(r.P50),
			P99:     msText(r.P99),
			Max:     msText(r.Max),
			Behind:  r.BehindCulprit,
			Culprit: culpritText(r),
			Victims: r.InsertsCancelled(),
		})
		series = append(series, reportSeries{run: r.Run, points: p99Series(r.Samples, reportBucket)})
		if r.Run == RunMoirai {
			p.Decisions = r.Decisions
		}
	}
	p.Chart = chart(series, cfg.slo(), planFor(cfg.Duration).start, p.Decisions, cfg.Duration)
	return reportTemplate.Execute(w, p)
}

// WriteChart writes the report's chart alone, as a standalone SVG file:
// the inserts' p99 per 100 ms in each run against the objective, the
// culprit's start and moirai's cancellations marked.
func WriteChart(w io.Writer, cfg Config, s Summary) error {
	runs := []*Summary{&s}
	if s.Baseline != nil {
		runs = []*Summary{s.Baseline, &s}
	}
	var series []reportSeries
	var ds []Decision
	for _, r := range runs {
		series = append(series, reportSeries{run: r.Run, points: p99Series(r.Samples, reportBucket)})
		if r.Run == RunMoirai {
			ds = r.Decisions
		}
	}
	svg := string(chart(series, cfg.slo(), planFor(cfg.Duration).start, ds, cfg.Duration))
	// A standalone file needs a white background; the page gives it one.
	svg = strings.Replace(svg, ">", `><rect width="100%" height="100%" fill="#fff"/>`, 1)
	_, err := io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+svg+"\n")
	return err
}

type reportPage struct {
	SLO, Duration string
	Rate          float64
	Seed          uint64
	Runs          []reportRun
	Chart         template.HTML
	Decisions     []Decision
}

type reportRun struct {
	Title            string
	Sent, OK, Failed int64
	Shed, Behind     int64
	P50, P99, Max    string
	Culprit          string
	Victims          int
}

func msText(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func culpritText(r *Summary) string {
	switch {
	case r.CulpritCancelled():
		return fmt.Sprintf("cancelled in batch %d of %d", r.CulpritBatch, r.CulpritBatches)
	case r.CulpritErr != "":
		return "failed: " + r.CulpritErr
	case r.CulpritBatch == 0:
		return "never took the lock"
	}
	return fmt.Sprintf("completed %d of %d batches", r.CulpritDone, r.CulpritBatches)
}

// point is one bucket of a series: its start and the p99 of the inserts
// sent in it (failed ones count as their latency too).
type point struct {
	at  time.Duration
	p99 time.Duration
}

type reportSeries struct {
	run    string
	points []point
}

// p99Series buckets samples (sorted by At) by width and returns each
// non-empty bucket's p99.
func p99Series(samples []Sample, width time.Duration) []point {
	var out []point
	var lat []time.Duration
	flush := func(b int64) {
		if len(lat) == 0 {
			return
		}
		slices.Sort(lat)
		out = append(out, point{at: time.Duration(b) * width, p99: quantile(lat, 0.99)})
		lat = lat[:0]
	}
	cur := int64(-1)
	for _, s := range samples {
		b := int64(s.At / width)
		if b != cur {
			flush(cur)
			cur = b
		}
		lat = append(lat, s.Latency)
	}
	flush(cur)
	return out
}

// chart draws the series as an SVG: time on x, p99 on a log scale on y
// (the runs differ by orders of magnitude), the objective as a dashed
// line, the culprit's start and moirai's acted-on decisions as markers.
func chart(series []reportSeries, slo, culprit time.Duration, ds []Decision, length time.Duration) template.HTML {
	const w, h, left, bottom, top, right = 860.0, 300.0, 60.0, 30.0, 10.0, 20.0
	lo, hi := math.Log10(0.1), math.Log10(10000.0) // ms
	var maxT time.Duration = length
	for _, s := range series {
		if n := len(s.points); n > 0 && s.points[n-1].at+reportBucket > maxT {
			maxT = s.points[n-1].at + reportBucket
		}
	}
	x := func(t time.Duration) float64 { return left + (w-left-right)*float64(t)/float64(maxT) }
	y := func(d time.Duration) float64 {
		v := math.Log10(max(float64(d)/float64(time.Millisecond), 0.1))
		v = min(max(v, lo), hi)
		return top + (h-top-bottom)*(1-(v-lo)/(hi-lo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" role="img" aria-label="p99 latency of the inserts over time, per run">`, w, h)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, left, top, w-left-right, h-top-bottom)
	for _, v := range []float64{1, 10, 100, 1000} {
		d := time.Duration(v * float64(time.Millisecond))
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%g ms</text>`,
			left, w-right, y(d), y(d), left-4, y(d)+4, v)
	}
	for t := time.Duration(0); t <= maxT; t += time.Second {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11" text-anchor="middle">%ds</text>`, x(t), h-bottom+16, int(t/time.Second))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 4"/><text x="%.0f" y="%.1f" font-size="11" fill="#c00">objective %v</text>`,
		left, w-right, y(slo), y(slo), left+6, y(slo)-4, slo)
	fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#555" stroke-dasharray="2 3"/><text x="%.1f" y="%.0f" font-size="11">culprit starts</text>`,
		x(culprit), x(culprit), top, h-bottom, x(culprit)+4, top+12)
	for _, d := range ds {
		if d.Outcome == "acted" {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#070"/><text x="%.1f" y="%.0f" font-size="11" fill="#070">%s %s</text>`,
				x(d.At), x(d.At), top, h-bottom, x(d.At)+4, top+26, template.HTMLEscapeString(d.Action), template.HTMLEscapeString(d.Class))
		}
	}
	colors := map[string]string{RunNone: "#d55e00", RunMoirai: "#0072b2"}
	for i, s := range series {
		if len(s.points) == 0 {
			continue
		}
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.at+reportBucket/2), y(p.p99)))
		}
		c := colors[s.run]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, c, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="12" fill="%s">%s</text>`, w-right-110, top+16+float64(i)*15, c,
			template.HTMLEscapeString(runShort(s.run)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every user-supplied string above is escaped
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"dur": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>moirai demo report</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top;white-space:nowrap}
th,td.l{white-space:normal}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.details{color:#555;font-size:.85em;white-space:pre-wrap}
</style></head><body>
<h1>moirai demo</h1>
<p>An HTTP service whose inserts take the table lock <code>table:orders</code> for about a millisecond,
{{.Rate}} per second (Poisson, seed {{.Seed}}), for {{.Duration}} per run. A quarter into each run a culprit
transaction holds the lock in long batches. The same scenario ran without control (moirai only traces) and
with moirai's defaults (targeted cancellation, objective p99 ≤ {{.SLO}}).</p>
<h2>The runs side by side</h2>
<table>
<tr><th class="l">run</th><th>inserts sent</th><th>succeeded</th><th>failed</th><th>not sent (too many in flight)</th>
<th>p50</th><th>p99</th><th>max</th><th>waited behind the culprit</th><th class="l">culprit</th><th>inserts cancelled</th></tr>
{{range .Runs}}<tr><td class="l">{{.Title}}</td><td>{{.Sent}}</td><td>{{.OK}}</td><td>{{.Failed}}</td><td>{{.Shed}}</td>
<td>{{.P50}}</td><td>{{.P99}}</td><td>{{.Max}}</td><td>{{.Behind}}</td><td class="l">{{.Culprit}}</td><td>{{.Victims}}</td></tr>
{{end}}</table>
<h2>p99 latency of the inserts, per 100 ms</h2>
{{.Chart}}
<h2>moirai's decisions</h2>
{{if .Decisions}}<table>
<tr><th>at</th><th class="l">policy</th><th class="l">action</th><th class="l">outcome</th><th>task</th><th class="l">class</th><th class="l">why</th></tr>
{{range .Decisions}}<tr><td>{{dur .At}}</td><td class="l">{{.Policy}}</td><td class="l">{{.Action}}</td><td class="l">{{.Outcome}}</td><td>{{.Task}}</td><td class="l">{{.Class}}</td>
<td class="l">{{.Reason}}{{if .Note}} — {{.Note}}{{end}}<div class="details">{{.Details}}</div></td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}
<p>Written by <code>moirai demo</code>; the same numbers as its terminal output.</p>
</body></html>
`))

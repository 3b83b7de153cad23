package report

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/moirai-go/moirai/bench"
)

// HTML writes a self-contained report page: a header (suite, start, seed,
// duration, machine), warnings for cases whose culprit does not degrade
// the service, the table of rows of each suite with each controller's
// averages, and per case a figure of the light requests' throughput and p99
// latency over time, one line per run, with the culprit's injection and the
// controllers' actions marked. The page has no scripts and references no
// external resource: CSS and SVG are inline.
func HTML(w io.Writer, r *bench.Results) error {
	if r == nil {
		return fmt.Errorf("report.HTML: nil results")
	}
	data := pageData{
		Suite:    r.Suite,
		Started:  startedText(r),
		Seed:     strconv.FormatUint(r.Seed, 10),
		Duration: r.Duration,
		Machine:  machine(r.Machine),
		NRows:    len(r.Rows),
		NRuns:    r.NumRuns(),
	}
	pal := palette(r)
	n := 0
	for _, s := range group(r) {
		ps := pageSuite{Name: s.Name}
		for _, c := range s.Cases {
			n++
			id := fmt.Sprintf("case-%d-%s", n, slug(c.Case))
			sc := sanityOf(c)
			if sc.Status == "not-degraded" || sc.Status == "failed" {
				data.Warnings = append(data.Warnings, pageWarning{Case: c.Case, Text: sc.Text, Anchor: id})
			}
			for _, row := range c.Rows {
				ps.Rows = append(ps.Rows, htmlRow(row, id))
			}
			title := c.Case
			if c.Suite != "" {
				title += " (suite " + c.Suite + ")"
			}
			title += ": light requests over time"
			fig := pageFigure{ID: id, Case: c.Case, Suite: c.Suite, Sanity: sc}
			draw := figure
			if c.Suite == pathfenceSuite {
				draw = pathfenceFigure
				title = c.Case + " (suite pathfence): p99 latency per path over time"
			}
			if svg := draw(c, pal, title); svg != "" {
				// figure escapes every text it writes.
				fig.SVG = template.HTML(svg)
				for _, at := range injections(c.Runs) {
					fig.Injected = append(fig.Injected, fmt.Sprintf("%.2f s", at.Seconds()))
				}
			}
			data.Figures = append(data.Figures, fig)
		}
		for _, a := range averages(s.rows()) {
			pa := pageAvg{Controller: a.Controller, Cases: a.Cases, Failed: a.Failed,
				VictimsCancelled: a.VictimsCancelled, CulpritsCancelled: a.CulpritsCancelled}
			if a.Cases > 0 {
				pa.Tput, pa.P99 = fmtNorm(a.ThroughputNorm), fmtNorm(a.P99Norm)
				pa.Drop, pa.SLO = fmtPct(a.DropRate), fmtPct(a.SLOAttainment)
			}
			ps.Averages = append(ps.Averages, pa)
		}
		data.Suites = append(data.Suites, ps)
	}
	return page.Execute(w, data)
}

type pageData struct {
	Suite, Started, Seed, Duration, Machine string
	NRows, NRuns                            int
	Warnings                                []pageWarning
	Suites                                  []pageSuite
	Figures                                 []pageFigure
}

type pageWarning struct{ Case, Text, Anchor string }

type pageSuite struct {
	Name     string
	Rows     []pageRow
	Averages []pageAvg
}

type pageRow struct {
	Case, Controller, Anchor string
	Error                    string
	Tput, P99, Drop          string
	Cancelled, Rejected, SLO string
	Victims, R, Status       string
	TputBad, P99Bad          bool
	StatusClass              string
}

type pageAvg struct {
	Controller                          string
	Cases, Failed                       int
	Tput, P99, Drop, SLO                string
	VictimsCancelled, CulpritsCancelled int
}

type pageFigure struct {
	ID, Case, Suite string
	SVG             template.HTML
	Injected        []string
	Sanity          sanity
}

// htmlRow formats a row for the page.
func htmlRow(row bench.Row, anchor string) pageRow {
	pr := pageRow{Case: row.Case, Controller: row.Controller, Anchor: anchor, Error: row.Error}
	if row.Error != "" {
		return pr
	}
	pr.Tput, pr.P99, pr.Drop = fmtNorm(row.ThroughputNorm), fmtNorm(row.P99Norm), fmtPct(row.DropRate)
	pr.Cancelled, pr.Rejected, pr.SLO = fmtCancelled(row), strconv.Itoa(row.Rejected), fmtPct(row.SLOAttainment)
	pr.Victims, pr.R = fmtVictims(row), fmtReduction(row)
	pr.TputBad, pr.P99Bad = row.ThroughputNorm <= 0.8, row.P99Norm >= 2
	switch st := status(row); st {
	case "degraded":
		pr.Status, pr.StatusClass = "degraded ✓", "ok"
	case "NOT DEGRADED":
		pr.Status, pr.StatusClass = "⚠ NOT degraded", "warn"
	}
	return pr
}

// slug makes an id fragment of a name.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
				b.WriteByte('-')
			}
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>moirai bench report: {{.Suite}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222; background: #fff; margin: 0 auto; padding: 16px 24px 48px; max-width: 1200px; line-height: 1.4; }
h1 { font-size: 1.5em; margin: 0.4em 0; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin-top: 1.2em; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 0.5em 0 1em; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; }
.warn-box { background: #fff4e5; border-left: 5px solid #d55e00; padding: 8px 12px; margin: 12px 0; }
.warn-box p { margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }
th, td { border: 1px solid #d4d4d4; padding: 3px 7px; vertical-align: top; }
th { background: #f2f2f2; text-align: left; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafafa; }
tr.failed td { background: #fdecea; }
td.bad { color: #a3001b; font-weight: 600; }
td.ok { color: #006b4e; }
td.warn { color: #a3001b; font-weight: 700; background: #fff4e5; }
td.err { color: #a3001b; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.95em; }
figure { margin: 24px 0 36px; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 13px; color: #444; margin-top: 4px; max-width: 960px; }
.note { font-size: 13px; color: #444; }
a { color: #0062a3; }
</style>
</head>
<body>
<header>
<h1>moirai bench report: suite <code>{{.Suite}}</code></h1>
<dl class="meta">
<dt>Started</dt><dd>{{.Started}}</dd>
<dt>Seed</dt><dd>{{.Seed}}</dd>
<dt>Duration of a run</dt><dd>{{.Duration}}</dd>
<dt>Machine</dt><dd>{{.Machine}}</dd>
<dt>Measured</dt><dd>{{.NRows}} rows from {{.NRuns}} runs</dd>
</dl>
</header>
{{if .Warnings}}<div class="warn-box" role="alert">
<p><strong>⚠ Sanity check failed for {{len .Warnings}} case(s).</strong> A case whose culprit does not degrade the uncontrolled service measures nothing: its controllers' numbers cannot show an improvement.</p>
{{range .Warnings}}<p><a href="#{{.Anchor}}"><code>{{.Case}}</code></a>: {{.Text}}</p>
{{end}}</div>
{{end}}
<p class="note">One row per (case, controller), normalized by the same case run without its culprit and without control in the same invocation.
<em>drop rate</em>: (rejected + cancelled requests) / all requests.
<em>cancelled</em>: total (culprits / victims).
<em>SLO</em>: fraction of light requests completed within the case's latency objective.
<em>victim mean</em>: the light requests' mean latency in the normal run / the uncontrolled run / this run.
<em>r</em>: pBox's interference reduction ratio (1: interference removed; 0: no better than no control).
The uncontrolled row (<code>none</code>) carries the case's sanity check (throughput_norm ≤ 0.8 or p99_norm ≥ 2).
Values in red are degraded (throughput_norm ≤ 0.8, p99_norm ≥ 2).</p>
{{range .Suites}}
<h2>Suite <code>{{.Name}}</code></h2>
<table class="rows">
<thead><tr><th>case</th><th>controller</th><th>throughput_norm</th><th>p99_norm</th><th>drop rate</th><th>cancelled (culprits/victims)</th><th>rejected</th><th>SLO</th><th>victim mean ms (normal / uncontrolled / run)</th><th>r</th><th>sanity</th></tr></thead>
<tbody>
{{range .Rows}}{{if .Error}}<tr class="failed"><td><a href="#{{.Anchor}}"><code>{{.Case}}</code></a></td><td><code>{{.Controller}}</code></td><td class="err" colspan="9"><strong>failed:</strong> {{.Error}}</td></tr>
{{else}}<tr><td><a href="#{{.Anchor}}"><code>{{.Case}}</code></a></td><td><code>{{.Controller}}</code></td><td class="num{{if .TputBad}} bad{{end}}">{{.Tput}}</td><td class="num{{if .P99Bad}} bad{{end}}">{{.P99}}</td><td class="num">{{.Drop}}</td><td class="num">{{.Cancelled}}</td><td class="num">{{.Rejected}}</td><td class="num">{{.SLO}}</td><td class="num">{{.Victims}}</td><td class="num">{{.R}}</td><td class="{{.StatusClass}}">{{.Status}}</td></tr>
{{end}}{{end}}</tbody>
</table>
<h3>Averages per controller over the cases</h3>
<table class="averages">
<thead><tr><th>controller</th><th>cases</th><th>mean throughput_norm</th><th>mean p99_norm</th><th>mean drop rate</th><th>mean SLO</th><th>victims cancelled</th><th>culprits cancelled</th><th>failed</th></tr></thead>
<tbody>
{{range .Averages}}<tr><td><code>{{.Controller}}</code></td><td class="num">{{.Cases}}</td>{{if .Cases}}<td class="num">{{.Tput}}</td><td class="num">{{.P99}}</td><td class="num">{{.Drop}}</td><td class="num">{{.SLO}}</td><td class="num">{{.VictimsCancelled}}</td><td class="num">{{.CulpritsCancelled}}</td>{{else}}<td class="num" colspan="6">–</td>{{end}}<td class="num">{{.Failed}}</td></tr>
{{end}}</tbody>
</table>
{{end}}
<h2>Time series per case</h2>
<p class="note">Light requests only, per interval of the run. The dashed grey line is the normal run (no culprit, no control), the reference; every other line is a run with the culprit under one controller. The dashed vertical line marks the culprit's injection. Below the charts, one lane per run shows the controller's actions: ▼ a culprit cancelled, ✕ a victim cancelled, □ requests rejected in that interval.</p>
{{range .Figures}}<figure id="{{.ID}}">
{{if .SVG}}{{.SVG}}{{else}}<p class="note">No time series recorded for <code>{{.Case}}</code>.</p>{{end}}
<figcaption><code>{{.Case}}</code>{{if .Suite}} (suite <code>{{.Suite}}</code>){{end}}{{if .Injected}}; culprit injected at {{range $i, $t := .Injected}}{{if $i}}, {{end}}{{$t}}{{end}}{{end}}. Sanity check: {{.Sanity.Text}}.</figcaption>
</figure>
{{end}}
</body>
</html>
`))

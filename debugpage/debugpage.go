// Package debugpage serves moirai's live page, /debug/moirai: the live
// tasks with their holds and waits, the resources with their contention, and
// the recent decisions with their full explanations. The page is one
// self-contained HTML document (inline CSS, no scripts or external assets)
// that refreshes itself; ?format=json serves the same data as JSON.
//
// Everything shown is escaped by html/template. Task keys are user data and
// are hidden unless Config.ShowKeys is set.
package debugpage

import (
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/attrmap"
	"github.com/moirai-go/moirai/policy"
)

// Config configures the page.
type Config struct {
	Disabled bool          // serve 404: the page is off
	ShowKeys bool          // show task keys (user data); hidden by default
	Refresh  time.Duration // the page's self-refresh period (default 2s)
	// Sections adds providers' data (fences, the guard): each is shown as a
	// titled key/value table and as a JSON member.
	Sections []Section
	// TraceURL links each decision's trace id (see moirai.WithTraceID) to
	// the tracing backend: the URL with "{trace_id}" replaced by the id,
	// such as "https://jaeger.example/trace/{trace_id}". Empty: the id is
	// shown as text.
	TraceURL string
}

// Section is a provider's block on the page.
type Section interface {
	Title() string
	Rows() [][2]string
}

// View is the page's data, also its JSON form.
type View struct {
	Time      time.Time      `json:"time"`
	Firing    []string       `json:"firing"`
	Tasks     []TaskView     `json:"tasks"`
	Resources []ResourceView `json:"resources"`
	Decisions []DecisionView `json:"decisions"`
	// Reexecution is what moirai.Retry (and the middlewares'
	// re-execution) did: re-executions waiting, admitted, completed,
	// dropped (given up), and first runs held behind a class's cap.
	Reexecution ReexecutionView        `json:"reexecution"`
	Tree        TreeView               `json:"tree"`
	Sections    map[string][][2]string `json:"sections,omitempty"`
	Refresh     int                    `json:"-"`
}

// TaskView is one live task.
type TaskView struct {
	ID        uint64 `json:"id"`
	Key       string `json:"key,omitempty"`
	Class     string `json:"class"`
	Age       string `json:"age"`
	Cancelled bool   `json:"cancelled"`
	// Progress is the progress the task reported, done over total, or
	// nil when it reported none.
	Progress *float64    `json:"progress,omitempty"`
	Usage    []UsageView `json:"usage"`
}

// UsageView is a task's hold or wait on one resource.
type UsageView struct {
	Resource string `json:"resource"`
	Held     int64  `json:"held"`
	Waiting  int32  `json:"waiting"`
	Hold     string `json:"hold"`
	Wait     string `json:"wait"`
}

// ResourceView is one resource's contention.
type ResourceView struct {
	Name string `json:"name"`
	// Kind is the resource's kind: lock, queue, memory, cpu or io.
	Kind string `json:"kind"`
	// Capacity is the resource's size in units (slots, bytes, pages); 0
	// when it has none, as a lock (one writer or many readers), which the
	// page shows as "–".
	Capacity   int64  `json:"capacity"`
	Holders    int    `json:"holders"`
	Waiters    int    `json:"waiters"`
	Held       int64  `json:"held"`
	WindowWait string `json:"window_wait"`
}

// DecisionView is one decision with its explanation.
type DecisionView struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Policy  string    `json:"policy"`
	Action  string    `json:"action"`
	Task    uint64    `json:"task"`
	Key     string    `json:"key,omitempty"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason"`
	Note    string    `json:"note,omitempty"`
	// Lost is a cancellation's work thrown away, in resource-seconds.
	Lost float64 `json:"lost,omitempty"`
	// Details is the explanation, structured: groups are objects.
	Details map[string]any `json:"details,omitempty"`
	// TraceID is the W3C trace id of the decided task's request, when the
	// controller reads one (moirai.WithTraceID); TraceURL its link, when
	// Config.TraceURL is set.
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// Handler serves the page for c.
func Handler(c *moirai.Controller, cfg Config) http.Handler {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 2 * time.Second
	}
	return &handler{c: c, cfg: cfg}
}

type handler struct {
	c   *moirai.Controller
	cfg Config
}

// Collect builds the view the page shows.
func Collect(c *moirai.Controller, cfg Config) View {
	s := c.Snapshot()
	v := View{Time: s.Time, Firing: c.Firing(), Refresh: int(max(cfg.Refresh/time.Second, 1))}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		tv := TaskView{ID: t.ID, Class: t.Class, Age: t.Age.Round(time.Millisecond).String(), Cancelled: t.Cancelled}
		if p, ok := t.Progress(); ok {
			tv.Progress = &p
		}
		if cfg.ShowKeys {
			tv.Key = t.Key
		}
		for _, u := range s.UsageOf(i) {
			if u.Held == 0 && u.Waiting == 0 {
				continue
			}
			tv.Usage = append(tv.Usage, UsageView{Resource: s.Resources[u.Res].Name, Held: u.Held, Waiting: u.Waiting,
				Hold: short(u.Hold), Wait: short(u.Wait)})
		}
		v.Tasks = append(v.Tasks, tv)
	}
	for _, r := range s.Resources {
		v.Resources = append(v.Resources, ResourceView{Name: r.Name, Kind: r.Kind.String(), Capacity: r.Capacity, Holders: r.Holders,
			Waiters: r.Waiters, Held: r.Held, WindowWait: short(r.WindowWait)})
	}
	v.Reexecution = reexecutionView(c.RetryStats())
	ts := c.TreeStats()
	v.Tree = TreeView{IgnoredCulprits: ts.IgnoredCulprits, NoTrustedPeer: ts.NoTrustedPeer}
	ds := c.Decisions()
	for i := len(ds) - 1; i >= 0; i-- { // newest first
		v.Decisions = append(v.Decisions, decisionView(ds[i], cfg))
	}
	for _, sec := range cfg.Sections {
		if v.Sections == nil {
			v.Sections = map[string][][2]string{}
		}
		v.Sections[sec.Title()] = sec.Rows()
	}
	return v
}

func decisionView(r policy.Record, cfg Config) DecisionView {
	d := DecisionView{Seq: r.Seq, Time: r.Time, Policy: r.Policy, Action: r.Action.String(), Task: r.Task,
		Outcome: r.Outcome.String(), Reason: r.Reason, Note: r.Note, Lost: r.Lost, TraceID: r.TraceID}
	if cfg.ShowKeys {
		d.Key = r.TaskKey
	}
	if r.TraceID != "" && cfg.TraceURL != "" {
		d.TraceURL = strings.ReplaceAll(cfg.TraceURL, "{trace_id}", r.TraceID)
	}
	if len(r.Details) > 0 {
		d.Details = attrmap.Map(r.Details, detailValue)
	}
	return d
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Disabled {
		http.NotFound(w, r)
		return
	}
	defer func() { // the page never takes the service down
		if p := recover(); p != nil {
			slog.Error("moirai: debug page panicked", "panic", fmt.Sprint(p))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	v := Collect(h.c, h.cfg)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := page.Execute(w, v); err != nil {
		slog.Warn("moirai: debug page", "err", err)
	}
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{"keys": sortedAnyKeys, "text": detailText, "pct": pct}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{.Refresh}}">
<title>moirai</title>
<style>body{font:14px system-ui,sans-serif;margin:1em;color:#222}table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}th{background:#eee}
.firing{color:#b00;font-weight:bold}.d{font-size:12px;color:#555}</style></head><body>
<h1>moirai</h1><p>at {{.Time.Format "15:04:05.000"}}{{if .Firing}} — <span class="firing">overload: {{range .Firing}}{{.}} {{end}}</span>{{else}} — no overload detected{{end}}</p>
<h2>Re-execution</h2>
<table id="reexecution"><tr><th>waiting</th><th>admitted</th><th>completed</th><th>dropped</th><th>cancelled first runs</th><th>first runs capped</th></tr>
{{with .Reexecution}}<tr><td>{{.Waiting}}</td><td>{{.Reexecuted}}</td><td>{{.Completed}}</td><td>{{.Dropped}}</td><td>{{.Cancelled}}</td><td>{{.Capped}}</td></tr>{{end}}</table>
{{with .Tree}}{{if or .IgnoredCulprits .NoTrustedPeer}}<h2>Request trees</h2>
<table id="tree"><tr><th>culprit answers ignored</th><th>trust</th></tr>
<tr><td>{{.IgnoredCulprits}}</td><td{{if .NoTrustedPeer}} class="firing"{{end}}>{{if .NoTrustedPeer}}no trusted peer: the tree cancels nothing upward from here{{else}}peers trusted{{end}}</td></tr></table>{{end}}{{end}}
<h2>Decisions ({{len .Decisions}})</h2>
<table id="decisions"><tr><th>#</th><th>time</th><th>policy</th><th>action</th><th>task</th><th>outcome</th><th>why</th></tr>
{{range .Decisions}}<tr class="decision"><td>{{.Seq}}</td><td>{{.Time.Format "15:04:05.000"}}</td><td>{{.Policy}}</td><td>{{.Action}}</td><td>{{.Task}}{{if .Key}} {{.Key}}{{end}}{{if .TraceURL}}<br><a class="trace" href="{{.TraceURL}}">trace {{.TraceID}}</a>{{else if .TraceID}}<br><span class="trace">trace {{.TraceID}}</span>{{end}}</td><td>{{.Outcome}}{{if .Note}} ({{.Note}}){{end}}</td>
<td>{{.Reason}}{{if .Lost}} (lost {{printf "%.3f" .Lost}} resource-s){{end}}{{$d := .Details}}{{if $d}}<div class="d">{{range keys $d}}{{.}}={{text (index $d .)}}<br>{{end}}</div>{{end}}</td></tr>
{{end}}</table>
<h2>Resources</h2>
<table><tr><th>name</th><th>kind</th><th>capacity</th><th>holders</th><th>waiters</th><th>held</th><th>wait in window</th></tr>
{{range .Resources}}<tr><td>{{.Name}}</td><td>{{.Kind}}</td><td>{{if .Capacity}}{{.Capacity}}{{else}}–{{end}}</td><td>{{.Holders}}</td><td>{{.Waiters}}</td><td>{{.Held}}</td><td>{{.WindowWait}}</td></tr>
{{end}}</table>
<h2>Tasks ({{len .Tasks}})</h2>
<table><tr><th>id</th><th>class</th><th>age</th><th>progress</th><th>holds and waits</th></tr>
{{range .Tasks}}<tr><td>{{.ID}}{{if .Key}} {{.Key}}{{end}}{{if .Cancelled}} (cancelled){{end}}</td><td>{{.Class}}</td><td>{{.Age}}</td><td>{{pct .Progress}}</td>
<td>{{range .Usage}}{{.Resource}}: held {{.Held}} for {{.Hold}}{{if .Waiting}}, waiting for {{.Wait}}{{end}}<br>{{end}}</td></tr>
{{end}}</table>
{{range $t, $rows := .Sections}}<h2>{{$t}}</h2><table>{{range $rows}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}</table>
{{end}}<p class="d">JSON: <a href="?format=json">?format=json</a></p></body></html>
`))

// short formats d to the microsecond below a second and to the
// millisecond above, where microseconds are noise.
func short(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

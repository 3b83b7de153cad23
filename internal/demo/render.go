package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// printer writes the start line, the refreshes and the summary, as text
// blocks or JSON lines. It keeps the first write error.
type printer struct {
	w    *errWriter
	cfg  Config
	addr string
	plan plan
	enc  *json.Encoder
}

func newPrinter(out io.Writer, cfg Config, addr string, p plan) *printer {
	w := &errWriter{w: out}
	return &printer{w: w, cfg: cfg, addr: addr, plan: p, enc: json.NewEncoder(w)}
}

func (p *printer) err() error { return p.w.err }

func (p *printer) start() {
	if p.cfg.Format == JSON {
		p.enc.Encode(struct {
			Type       string  `json:"type"`
			Addr       string  `json:"addr"`
			DurationMS float64 `json:"duration_ms"`
			Rate       float64 `json:"rate"`
			Seed       uint64  `json:"seed"`
			IntervalMS float64 `json:"interval_ms"`
			Resource   string  `json:"resource"`
			CulpritAt  float64 `json:"culprit_at_ms"`
			HoldMS     float64 `json:"culprit_hold_ms"`
			Batches    int     `json:"culprit_batches"`
		}{"start", p.addr, ms(p.cfg.Duration), p.cfg.Rate, p.cfg.Seed, ms(p.cfg.Interval),
			TableLock, ms(p.plan.start), ms(p.plan.hold), p.plan.batches})
		return
	}
	fmt.Fprintf(p.w, "moirai demo: service on http://%s, %v of inserts at %s/s (seed %d);\n",
		p.addr, p.cfg.Duration, fmtRate(p.cfg.Rate), p.cfg.Seed)
	fmt.Fprintf(p.w, "a culprit transaction holds %s for %v at a time, %d time(s), from %v.\n",
		TableLock, p.plan.hold, p.plan.batches, p.plan.start)
	if !p.cfg.Redraw {
		fmt.Fprintln(p.w)
	}
}

func (p *printer) refresh(v *View) {
	if p.cfg.Format == JSON {
		p.enc.Encode(jsonRefresh(v))
		return
	}
	var b strings.Builder
	if p.cfg.Redraw {
		b.WriteString(clearScreen)
	}
	sc := &v.Scenario
	fmt.Fprintf(&b, "--- moirai demo  %s / %v  (http://%s, %s inserts/s, seed %d) ---\n",
		dur(v.Elapsed), p.cfg.Duration, p.addr, fmtRate(p.cfg.Rate), p.cfg.Seed)
	fmt.Fprintf(&b, "scenario: inserts %d sent, %d done, %d in flight; culprit %s",
		sc.Sent, sc.Done, sc.InFlight, sc.CulpritState)
	if sc.CulpritBatch > 0 {
		fmt.Fprintf(&b, " (batch %d/%d)", sc.CulpritBatch, sc.CulpritBatches)
	}
	fmt.Fprintf(&b, "\nruntime:  %d live tasks\n\n", v.Live)

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	last := dur(p.cfg.Interval)
	fmt.Fprintf(tw, "RESOURCE\tKIND\tHOLDERS\tWAITERS\tWAIT/%s\tHOLD/%s\tWAIT TOTAL\tHOLD TOTAL\tHELD BY\n", last, last)
	for _, r := range v.Resources {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Holders, r.Waiters,
			dur(r.Wait), dur(r.Hold), dur(r.TotalWait), dur(r.TotalHold), heldBy(r.HeldBy))
	}
	tw.Flush()
	b.WriteByte('\n')

	if len(v.Tasks) == 0 {
		b.WriteString("no task holds or waits for a resource\n")
	} else {
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "TASK\tCLASS\tKEY\tAGE\tPROGRESS\tHOLDS (FOR)\tWAITS FOR (FOR)\n")
		for _, t := range v.Tasks {
			fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Class, orDash(t.Key), dur(t.Age),
				progress(t.Progress), uses(t.Holds), uses(t.Waits))
		}
		tw.Flush()
		if v.More > 0 {
			fmt.Fprintf(&b, "... and %d more tasks holding or waiting\n", v.More)
		}
	}
	if !p.cfg.Redraw {
		b.WriteByte('\n')
	}
	io.WriteString(p.w, b.String())
}

func (p *printer) summary(s *Summary, closeErr error) {
	if p.cfg.Format == JSON {
		js := jsonSummary{
			Type: "summary", ElapsedMS: ms(s.Elapsed),
			Sent: s.Sent, OK: s.OK, Failed: s.Failed, Shed: s.Shed,
			P50MS: ms(s.P50), P99MS: ms(s.P99), MaxMS: ms(s.Max),
			BehindCulprit:  s.BehindCulprit,
			CulpritBatches: s.CulpritBatches, CulpritDone: s.CulpritDone, CulpritErr: s.CulpritErr,
			Refreshes: s.Refreshes, PeakWaiters: s.PeakWaiters, CulpritSeenHolding: s.CulpritSeenHolding,
			RuntimeErrors: s.RuntimeErrors,
		}
		if closeErr != nil {
			js.CloseErr = closeErr.Error()
		}
		p.enc.Encode(js)
		return
	}
	var b strings.Builder
	b.WriteString("--- summary ---\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "elapsed\t%s\n", dur(s.Elapsed))
	fmt.Fprintf(tw, "inserts\t%d sent, %d ok, %d failed, %d shed by the load generator\n", s.Sent, s.OK, s.Failed, s.Shed)
	fmt.Fprintf(tw, "insert latency\tp50 %s, p99 %s, max %s (client-side, over loopback HTTP)\n",
		dur(s.P50), dur(s.P99), dur(s.Max))
	fmt.Fprintf(tw, "behind the culprit\t%d of %d inserts waited for %s while the culprit held it\n",
		s.BehindCulprit, s.OK+s.Failed, TableLock)
	outcome := "ok"
	if s.CulpritErr != "" {
		outcome = s.CulpritErr
	}
	fmt.Fprintf(tw, "culprit\t%d of %d batches of %v done: %s\n", s.CulpritDone, s.CulpritBatches, p.plan.hold, outcome)
	fmt.Fprintf(tw, "runtime view\t%d refreshes; culprit seen holding %s in %d; up to %d waiters at once\n",
		s.Refreshes, TableLock, s.CulpritSeenHolding, s.PeakWaiters)
	if closeErr != nil {
		fmt.Fprintf(tw, "controller\tClose: %v; %d runtime errors\n", closeErr, s.RuntimeErrors)
	} else {
		fmt.Fprintf(tw, "controller\tclosed cleanly, every task ended; %d runtime errors\n", s.RuntimeErrors)
	}
	tw.Flush()
	io.WriteString(p.w, b.String())
}

// JSON shapes: durations in milliseconds.

type jsonResource struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Holders     int      `json:"holders"`
	Waiters     int      `json:"waiters"`
	HeldBy      []uint64 `json:"held_by"`
	WaitMS      float64  `json:"wait_ms"`
	HoldMS      float64  `json:"hold_ms"`
	TotalWaitMS float64  `json:"total_wait_ms"`
	TotalHoldMS float64  `json:"total_hold_ms"`
}

type jsonUse struct {
	Resource string  `json:"resource"`
	MS       float64 `json:"ms"`
}

type jsonTask struct {
	ID       uint64    `json:"id"`
	Class    string    `json:"class"`
	Key      string    `json:"key,omitempty"`
	AgeMS    float64   `json:"age_ms"`
	Progress *float64  `json:"progress,omitempty"`
	Holds    []jsonUse `json:"holds,omitempty"`
	Waits    []jsonUse `json:"waits,omitempty"`
}

type jsonView struct {
	Type       string         `json:"type"`
	ElapsedMS  float64        `json:"elapsed_ms"`
	IntervalMS float64        `json:"interval_ms"`
	Scenario   Scenario       `json:"scenario"`
	Live       int            `json:"live"`
	Resources  []jsonResource `json:"resources"`
	Tasks      []jsonTask     `json:"tasks"`
	More       int            `json:"more"`
}

type jsonSummary struct {
	Type               string  `json:"type"`
	ElapsedMS          float64 `json:"elapsed_ms"`
	Sent               int64   `json:"sent"`
	OK                 int64   `json:"ok"`
	Failed             int64   `json:"failed"`
	Shed               int64   `json:"shed"`
	P50MS              float64 `json:"p50_ms"`
	P99MS              float64 `json:"p99_ms"`
	MaxMS              float64 `json:"max_ms"`
	BehindCulprit      int64   `json:"behind_culprit"`
	CulpritBatches     int     `json:"culprit_batches"`
	CulpritDone        int     `json:"culprit_done"`
	CulpritErr         string  `json:"culprit_error,omitempty"`
	Refreshes          int     `json:"refreshes"`
	PeakWaiters        int     `json:"peak_waiters"`
	CulpritSeenHolding int     `json:"culprit_seen_holding"`
	RuntimeErrors      int64   `json:"runtime_errors"`
	CloseErr           string  `json:"close_error,omitempty"`
}

func jsonRefresh(v *View) jsonView {
	j := jsonView{
		Type: "refresh", ElapsedMS: ms(v.Elapsed), IntervalMS: ms(v.Interval),
		Scenario: v.Scenario, Live: v.Live, More: v.More,
		Resources: make([]jsonResource, 0, len(v.Resources)),
		Tasks:     make([]jsonTask, 0, len(v.Tasks)),
	}
	for _, r := range v.Resources {
		ids := make([]uint64, 0, len(r.HeldBy))
		for _, h := range r.HeldBy {
			ids = append(ids, h.ID)
		}
		j.Resources = append(j.Resources, jsonResource{
			Name: r.Name, Kind: r.Kind, Holders: r.Holders, Waiters: r.Waiters, HeldBy: ids,
			WaitMS: ms(r.Wait), HoldMS: ms(r.Hold), TotalWaitMS: ms(r.TotalWait), TotalHoldMS: ms(r.TotalHold),
		})
	}
	for _, t := range v.Tasks {
		jt := jsonTask{ID: t.ID, Class: t.Class, Key: t.Key, AgeMS: ms(t.Age)}
		if t.Progress >= 0 {
			p := t.Progress
			jt.Progress = &p
		}
		for _, u := range t.Holds {
			jt.Holds = append(jt.Holds, jsonUse{u.Resource, ms(u.For)})
		}
		for _, u := range t.Waits {
			jt.Waits = append(jt.Waits, jsonUse{u.Resource, ms(u.For)})
		}
		j.Tasks = append(j.Tasks, jt)
	}
	return j
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// dur formats d for a person: to the millisecond, or to the microsecond
// below a millisecond.
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

func fmtRate(r float64) string { return strconv.FormatFloat(r, 'g', 4, 64) }

func progress(p float64) string {
	if p < 0 {
		return "-"
	}
	return strconv.Itoa(int(p*100)) + "%"
}

func uses(us []Use) string {
	if len(us) == 0 {
		return "-"
	}
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = u.Resource + " " + dur(u.For)
	}
	return strings.Join(parts, ", ")
}

func heldBy(hs []Holder) string {
	if len(hs) == 0 {
		return "-"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = "#" + strconv.FormatUint(h.ID, 10)
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter remembers the first write error and then writes nothing.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moirai-go/moirai/policy"
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
	// Which run of how many (see Run).
	run     string
	nth, of int
}

// runTitle describes a run in one line.
func runTitle(run string, slo time.Duration) string {
	if run == RunNone {
		return "without control (moirai traces, nothing acts)"
	}
	return fmt.Sprintf("with moirai (targeted cancellation, objective p99 ≤ %v)", slo)
}

// runShort names a run in a few words.
func runShort(run string) string {
	if run == RunNone {
		return "without control"
	}
	return "with moirai"
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
			Run        string  `json:"run"`
		}{"start", p.addr, ms(p.cfg.Duration), p.cfg.Rate, p.cfg.Seed, ms(p.cfg.Interval),
			TableLock, ms(p.plan.start), ms(p.plan.hold), p.plan.batches, p.run})
		return
	}
	fmt.Fprintf(p.w, "=== run %d of %d: %s\n", p.nth, p.of, runTitle(p.run, p.cfg.slo()))
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
		j := jsonRefresh(v)
		j.Run = p.run
		p.enc.Encode(j)
		return
	}
	var b strings.Builder
	if p.cfg.Redraw {
		b.WriteString(clearScreen)
	}
	sc := &v.Scenario
	fmt.Fprintf(&b, "--- moirai demo, run %d of %d %s  %s / %v  (http://%s, %s inserts/s, seed %d) ---\n",
		p.nth, p.of, runShort(p.run), dur(v.Elapsed), p.cfg.Duration, p.addr, fmtRate(p.cfg.Rate), p.cfg.Seed)
	fmt.Fprintf(&b, "scenario: inserts %d sent, %d done, %d in flight; culprit %s",
		sc.Sent, sc.Done, sc.InFlight, sc.CulpritState)
	if sc.CulpritBatch > 0 {
		fmt.Fprintf(&b, " (batch %d/%d)", sc.CulpritBatch, sc.CulpritBatches)
	}
	fmt.Fprintf(&b, "\nruntime:  %d live tasks\n", v.Live)
	switch {
	case p.run == RunNone:
		b.WriteString("moirai:   traces only, takes no decision\n\n")
	case v.LastDecision == nil:
		fmt.Fprintf(&b, "moirai:   no decision yet (objective p99 ≤ %v)\n\n", p.cfg.slo())
	default:
		d := v.LastDecision
		fmt.Fprintf(&b, "moirai:   %d decision(s); last at %s: %s %s #%d %q\n\n",
			v.Decisions, dur(d.At), d.Outcome, d.Action, d.Task, d.Class)
	}

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
	p.decisions(s)
	if p.cfg.Format == JSON {
		js := jsonSummary{
			Type: "summary", ElapsedMS: ms(s.Elapsed),
			Sent: s.Sent, OK: s.OK, Failed: s.Failed, Shed: s.Shed,
			P50MS: ms(s.P50), P99MS: ms(s.P99), MaxMS: ms(s.Max),
			BehindCulprit:  s.BehindCulprit,
			CulpritBatches: s.CulpritBatches, CulpritDone: s.CulpritDone, CulpritErr: s.CulpritErr,
			Refreshes: s.Refreshes, PeakWaiters: s.PeakWaiters, CulpritSeenHolding: s.CulpritSeenHolding,
			RuntimeErrors: s.RuntimeErrors, Run: s.Run, Decisions: len(s.Decisions),
			CulpritBatch: s.CulpritBatch, CulpritCancelled: s.CulpritCancelled(), InsertsCancelled: s.InsertsCancelled(),
		}
		if closeErr != nil {
			js.CloseErr = closeErr.Error()
		}
		p.enc.Encode(js)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- summary ---\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "elapsed\t%s\n", dur(s.Elapsed))
	fmt.Fprintf(tw, "inserts\t%d sent, %d ok, %d failed, %d shed by the load generator\n", s.Sent, s.OK, s.Failed, s.Shed)
	fmt.Fprintf(tw, "insert latency\tp50 %s, p99 %s, max %s (client-side, over loopback HTTP)\n",
		dur(s.P50), dur(s.P99), dur(s.Max))
	fmt.Fprintf(tw, "behind the culprit\t%d of %d inserts waited for %s while the culprit held it\n",
		s.BehindCulprit, s.OK+s.Failed, TableLock)
	fmt.Fprintf(tw, "culprit\t%d of %d batches of %v done: %s\n", s.CulpritDone, s.CulpritBatches, p.plan.hold, culpritOutcome(s))
	if s.CulpritCancelled() {
		fmt.Fprintf(tw, "\tits request failed: %s\n", s.CulpritErr)
	}
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
	Run        string         `json:"run"`
	Decisions  int            `json:"decisions"` // taken so far
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
	Run                string  `json:"run"`
	Decisions          int     `json:"decisions"`
	CulpritBatch       int     `json:"culprit_batch"`
	CulpritCancelled   bool    `json:"culprit_cancelled"`
	InsertsCancelled   int     `json:"inserts_cancelled"`
}

func jsonRefresh(v *View) jsonView {
	j := jsonView{
		Type: "refresh", ElapsedMS: ms(v.Elapsed), IntervalMS: ms(v.Interval),
		Scenario: v.Scenario, Live: v.Live, More: v.More, Decisions: v.Decisions,
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

// maxDecisionsShown bounds the decisions a table prints; JSON prints all.
const maxDecisionsShown = 20

// decisions prints the controller's decisions of a run, each with its
// reason and details.
func (p *printer) decisions(s *Summary) {
	if p.cfg.Format == JSON {
		for _, d := range s.Decisions {
			p.enc.Encode(struct {
				Type    string    `json:"type"`
				Run     string    `json:"run"`
				AtMS    float64   `json:"at_ms"`
				Policy  string    `json:"policy"`
				Action  string    `json:"action"`
				Outcome string    `json:"outcome"`
				Task    uint64    `json:"task"`
				Class   string    `json:"class"`
				Key     string    `json:"key,omitempty"`
				Reason  string    `json:"reason"`
				Note    string    `json:"note,omitempty"`
				Details jsonAttrs `json:"details"`
			}{"decision", s.Run, ms(d.At), d.Policy, d.Action, d.Outcome, d.Task, d.Class, d.Key,
				d.Reason, d.Note, jsonAttrs(d.Attrs)})
		}
		return
	}
	if s.Run != RunMoirai {
		return
	}
	var b strings.Builder
	if len(s.Decisions) == 0 {
		b.WriteString("--- decisions: none (moirai saw no objective at risk it could act on) ---\n")
	} else {
		fmt.Fprintf(&b, "--- decisions (%d) ---\n", len(s.Decisions))
	}
	for i, d := range s.Decisions {
		if i == maxDecisionsShown {
			fmt.Fprintf(&b, "... and %d more (-o json prints them all)\n", len(s.Decisions)-i)
			break
		}
		writeDecision(&b, &d)
	}
	io.WriteString(p.w, b.String())
}

// writeDecision writes one decision: a head line, its reason, and its
// details one per line; a group of groups (contention per resource, the
// top candidates) gets a line per member.
func writeDecision(b *strings.Builder, d *Decision) {
	fmt.Fprintf(b, "at %s  %s  %s: %s task #%d %q", dur(d.At), d.Policy, d.Outcome, d.Action, d.Task, d.Class)
	if d.Key != "" {
		fmt.Fprintf(b, " (key %s)", d.Key)
	}
	b.WriteByte('\n')
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "    why\t%s\n", d.Reason)
	if d.Note != "" {
		fmt.Fprintf(tw, "    note\t%s\n", d.Note)
	}
	for _, a := range d.Attrs {
		v := a.Value.Resolve()
		if v.Kind() != slog.KindGroup {
			fmt.Fprintf(tw, "    %s\t%s\n", a.Key, attrValue(v))
			continue
		}
		members := v.Group()
		if len(members) == 0 || !allGroups(members) {
			fmt.Fprintf(tw, "    %s\t%s\n", a.Key, formatAttrs(members))
			continue
		}
		label := a.Key
		for _, m := range members {
			fmt.Fprintf(tw, "    %s\t%s: %s\n", label, m.Key, formatAttrs(m.Value.Resolve().Group()))
			label = ""
		}
	}
	tw.Flush()
}

func allGroups(as []slog.Attr) bool {
	for _, a := range as {
		if a.Value.Resolve().Kind() != slog.KindGroup {
			return false
		}
	}
	return true
}

// formatAttrs renders attributes on one line as key=value pairs, groups
// in brackets, strings with spaces quoted.
func formatAttrs(as []slog.Attr) string {
	var b strings.Builder
	var walk func(as []slog.Attr)
	walk = func(as []slog.Attr) {
		for i, a := range as {
			if i > 0 {
				b.WriteByte(' ')
			}
			v := a.Value.Resolve()
			b.WriteString(a.Key)
			if v.Kind() == slog.KindGroup {
				b.WriteByte('[')
				walk(v.Group())
				b.WriteByte(']')
				continue
			}
			b.WriteByte('=')
			b.WriteString(attrValue(v))
		}
	}
	walk(as)
	return b.String()
}

// attrValue renders a non-group value, quoting strings that need it.
func attrValue(v slog.Value) string {
	s := v.String()
	if v.Kind() == slog.KindString && (s == "" || strings.ContainsAny(s, " \t\n\"=[]")) {
		return strconv.Quote(s)
	}
	return s
}

// jsonAttrs encodes attributes as a JSON object in their order; groups
// become objects, durations milliseconds.
type jsonAttrs []slog.Attr

func (as jsonAttrs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, a := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(a.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v := a.Value.Resolve()
		var val []byte
		switch v.Kind() {
		case slog.KindGroup:
			val, err = jsonAttrs(v.Group()).MarshalJSON()
		case slog.KindDuration:
			val, err = json.Marshal(ms(v.Duration()))
		case slog.KindFloat64:
			f := v.Float64()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				val, err = json.Marshal(v.String())
			} else {
				val, err = json.Marshal(f)
			}
		case slog.KindAny:
			val, err = json.Marshal(v.Any())
			if err != nil {
				val, err = json.Marshal(v.String())
			}
		default:
			val, err = json.Marshal(v.Any())
		}
		if err != nil {
			return nil, err
		}
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// culpritOutcome says how the culprit's request ended, for the summary.
func culpritOutcome(s *Summary) string {
	switch {
	case s.CulpritCancelled():
		return "cancelled by moirai through its context " + culpritWhere(s) +
			" (its transaction rolled back; a client would retry it, see moirai.Retry)"
	case s.CulpritErr != "":
		return "failed: " + s.CulpritErr
	}
	return "completed"
}

// culpritWhere says where in its batches the culprit was stopped.
func culpritWhere(s *Summary) string {
	switch {
	case s.CulpritBatch == 0:
		return "before it took " + TableLock
	case s.CulpritBatch == s.CulpritDone:
		return fmt.Sprintf("between batches %d and %d of %d", s.CulpritBatch, s.CulpritBatch+1, s.CulpritBatches)
	}
	return fmt.Sprintf("in batch %d of %d", s.CulpritBatch, s.CulpritBatches)
}

// culpritShort is culpritOutcome for a table cell.
func culpritShort(s *Summary) string {
	switch {
	case s.CulpritCancelled():
		return "cancelled by moirai " + culpritWhere(s)
	case s.CulpritErr != "":
		return "failed"
	}
	return fmt.Sprintf("completed %d of %d batches", s.CulpritDone, s.CulpritBatches)
}

// printCompare prints the two runs side by side.
func printCompare(out io.Writer, cfg Config, none, with *Summary) error {
	w := &errWriter{w: out}
	if none == nil || with == nil {
		return nil
	}
	slo := cfg.slo()
	if cfg.Format == JSON {
		side := func(s *Summary) map[string]any {
			return map[string]any{
				"sent": s.Sent, "ok": s.OK, "failed": s.Failed, "shed": s.Shed,
				"p50_ms": ms(s.P50), "p99_ms": ms(s.P99), "max_ms": ms(s.Max),
				"objective_met":  s.P99 <= slo,
				"behind_culprit": s.BehindCulprit, "peak_waiters": s.PeakWaiters,
				"culprit": culpritShort(s), "culprit_error": s.CulpritErr,
				"culprit_batches": s.CulpritBatches, "culprit_done": s.CulpritDone, "culprit_batch": s.CulpritBatch,
				"culprit_cancelled": s.CulpritCancelled(), "inserts_cancelled": s.InsertsCancelled(),
				"culprit_penalties": s.CulpritPenalties(),
				"decisions":         len(s.Decisions),
			}
		}
		json.NewEncoder(w).Encode(map[string]any{
			"type": "compare", "duration_ms": ms(cfg.Duration), "seed": cfg.Seed, "rate": cfg.Rate,
			"objective_p99_ms": ms(slo), RunNone: side(none), RunMoirai: side(with),
		})
		return w.err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== side by side: the same %v of inserts at %s/s, the same seed (%d)\n",
		cfg.Duration, fmtRate(cfg.Rate), cfg.Seed)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\twithout control\twith moirai\n")
	fmt.Fprintf(tw, "inserts sent / ok / failed\t%d / %d / %d\t%d / %d / %d\n",
		none.Sent, none.OK, none.Failed, with.Sent, with.OK, with.Failed)
	fmt.Fprintf(tw, "insert latency p50\t%s\t%s\n", dur(none.P50), dur(with.P50))
	fmt.Fprintf(tw, "insert latency p99\t%s\t%s\n", dur(none.P99), dur(with.P99))
	fmt.Fprintf(tw, "insert latency max\t%s\t%s\n", dur(none.Max), dur(with.Max))
	fmt.Fprintf(tw, "objective p99 ≤ %v\t%s\t%s\n", slo, met(none.P99, slo), met(with.P99, slo))
	fmt.Fprintf(tw, "inserts behind the culprit\t%d\t%d\n", none.BehindCulprit, with.BehindCulprit)
	fmt.Fprintf(tw, "most waiters seen on %s\t%d\t%d\n", TableLock, none.PeakWaiters, with.PeakWaiters)
	fmt.Fprintf(tw, "culprit\t%s\t%s\n", culpritShort(none), culpritShort(with))
	fmt.Fprintf(tw, "cancelled: culprit / inserts\t%d / %d\t%d / %d\n",
		none.CulpritsCancelled(), none.InsertsCancelled(), with.CulpritsCancelled(), with.InsertsCancelled())
	fmt.Fprintf(tw, "penalties: culprit\t%d\t%d\n", none.CulpritPenalties(), with.CulpritPenalties())
	fmt.Fprintf(tw, "decisions\t%s\t%s\n", decisionCount(none), decisionCount(with))
	tw.Flush()
	if with.CulpritCancelled() {
		fmt.Fprintf(&b, "\nWith moirai the culprit was cancelled through its context: its request failed with\n  %s\n"+
			"and its transaction rolled back; a client would retry it once the table is free (see moirai.Retry).\n",
			with.CulpritErr)
	}
	io.WriteString(w, b.String())
	return w.err
}

func decisionCount(s *Summary) string {
	if s.Run == RunNone {
		return "none (traces only)"
	}
	acted := 0
	for _, d := range s.Decisions {
		if d.Outcome == policy.Acted.String() {
			acted++
		}
	}
	return fmt.Sprintf("%d, %d acted", len(s.Decisions), acted)
}

func met(p99, slo time.Duration) string {
	if p99 <= slo {
		return "met"
	}
	return "missed"
}

package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"math"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortConfig is the shortest run that shows the culprit.
func shortConfig(out *bytes.Buffer, f Format) Config {
	return Config{
		Duration: MinDuration,
		Seed:     7,
		Rate:     40,
		Interval: 200 * time.Millisecond,
		Format:   f,
		Out:      out,
	}
}

// The assertions are structural: which names and rows appear, never how
// long anything took, so a loaded machine changes numbers but not verdicts.
func TestRunTable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sum, err := Run(context.Background(), shortConfig(&out, Table))
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)

	if strings.Contains(text, "\x1b[") {
		t.Error("output to a non-terminal contains ANSI escapes")
	}
	checks := []struct {
		name string
		re   string
	}{
		{"resource row", `(?m)^table:orders\s+lock\s+\d+\s+\d+`},
		{"culprit holding the lock", `(?m)^#\d+\s+SELECT orders FOR UPDATE\s+report-job\s.*table:orders \S+\s+-$`},
		{"insert waiting for the lock", `(?m)^#\d+\s+INSERT orders\s+customer-\d+\s.*-\s+table:orders \S+$`},
		{"resource with waiters", `(?m)^table:orders\s+lock\s+1\s+[1-9]\d*\s`},
		{"summary", `(?m)^--- summary ---$`},
		{"clean close", `closed cleanly, every task ended`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).MatchString(text) {
			t.Errorf("output lacks %s (%s)", c.name, c.re)
		}
	}

	checks = []struct {
		name string
		re   string
	}{
		{"first run", `(?m)^=== run 1 of 2: without control`},
		{"second run", `(?m)^=== run 2 of 2: with moirai`},
		// The culprit may be penalized before its next batch (by pbox) as
		// well as cancelled; either decision may be the last.
		{"the last decision, live", `(?m)^moirai:\s+\d+ decision\(s\); last at \S+: acted (cancel|penalize) #\d+ "SELECT orders FOR UPDATE"$`},
		{"a decision with its reasons", `(?m)^at \S+\s+atropos\s+acted: cancel task #\d+ "SELECT orders FOR UPDATE" \(key report-job\)\n\s+why\s+.*table:orders.*\n\s+contention\s+table:orders: level=\S+ waiters=\d+ contended=true( known_heavy=\S+)?( episode=\S+)?( unrelieved=\S+)?( min_gain=\S+)?$`},
		{"the chosen candidate", `(?m)^\s+top\s+#1: task=\d+ class="SELECT orders FOR UPDATE" .*gains\[table:orders=.*chosen=true`},
		{"the cancelled culprit", `(?m)^culprit\s+\d+ of \d+ batches of \S+ done: cancelled by moirai through its context .*see moirai\.Retry\)$`},
		{"its 503", `(?m)^\s+its request failed: 503 Service Unavailable: moirai: task cancelled`},
		{"side by side", `(?m)^=== side by side`},
		{"the culprits side by side", `(?m)^culprit\s+completed \d+ of \d+ batches\s+cancelled by moirai (in batch|between batches)`},
		{"cancellations side by side", `(?m)^cancelled: culprit / inserts\s+0 / 0\s+1 / 0$`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).MatchString(text) {
			t.Errorf("output lacks %s (%s)", c.name, c.re)
		}
	}

	base := sum.Baseline
	if base == nil || base.Run != RunNone || sum.Run != RunMoirai {
		t.Fatalf("runs: %+v, baseline %+v; want none then moirai", sum.Run, base)
	}
	for _, s := range []*Summary{base, &sum} {
		if s.Sent == 0 || s.OK == 0 {
			t.Errorf("%s: %d sent, %d ok; want some of each", s.Run, s.Sent, s.OK)
		}
		if got := s.OK + s.Failed; got != s.Sent {
			t.Errorf("%s: %d ok + %d failed != %d sent", s.Run, s.OK, s.Failed, s.Sent)
		}
		if s.RuntimeErrors != 0 {
			t.Errorf("%s: runtime reported %d errors", s.Run, s.RuntimeErrors)
		}
		if s.InsertsCancelled() != 0 {
			t.Errorf("%s: %d inserts cancelled", s.Run, s.InsertsCancelled())
		}
	}
	// Without control the culprit runs to the end while inserts queue.
	if base.PeakWaiters == 0 || base.CulpritSeenHolding == 0 {
		t.Errorf("without control: peak waiters %d, culprit seen holding in %d refreshes; want both > 0",
			base.PeakWaiters, base.CulpritSeenHolding)
	}
	if base.CulpritBatches < 1 || base.CulpritDone != base.CulpritBatches || base.CulpritErr != "" || len(base.Decisions) != 0 {
		t.Errorf("without control: culprit %d of %d batches, error %q, %d decisions; want it completed, no decision",
			base.CulpritDone, base.CulpritBatches, base.CulpritErr, len(base.Decisions))
	}
	// The HTML report shows both runs, their series and the decision.
	var page bytes.Buffer
	if err := WriteReport(&page, shortConfig(nil, Table), sum); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, want := range []string{runTitle(RunNone, DefaultSLO), runTitle(RunMoirai, DefaultSLO), "culprit starts", "objective 50ms", "atropos", "table:orders"} {
		if !strings.Contains(html, template.HTMLEscapeString(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(html, "<polyline"); n != 2 {
		t.Errorf("report has %d series, want 2", n)
	}
	for _, s := range []*Summary{base, &sum} {
		if int64(len(s.Samples)) != s.Sent {
			t.Errorf("%s: %d samples for %d inserts sent", s.Run, len(s.Samples), s.Sent)
		}
	}
	// With moirai the culprit is cancelled, and only it: its request fails
	// with 503 and the cause.
	if !sum.CulpritCancelled() || sum.CulpritsCancelled() != 1 || sum.CulpritDone >= sum.CulpritBatches ||
		!strings.Contains(sum.CulpritErr, "503") || !strings.Contains(sum.CulpritErr, moirai.ErrCancelled.Error()) {
		t.Errorf("with moirai: culprit cancelled %v (%d times), %d of %d batches done, error %q; want it cancelled once, with a 503 and the cause",
			sum.CulpritCancelled(), sum.CulpritsCancelled(), sum.CulpritDone, sum.CulpritBatches, sum.CulpritErr)
	}
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if _, err := Run(context.Background(), shortConfig(&out, JSON)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var (
		types       []string
		runs        []string
		sawHolder   bool
		sawWaiters  bool
		sawCulprit  bool
		cancels     int
		summaryLine map[string]any
	)
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var line struct {
			Type      string         `json:"type"`
			Run       string         `json:"run"`
			Resources []jsonResource `json:"resources"`
			Tasks     []jsonTask     `json:"tasks"`
			Class     string         `json:"class"`
			Action    string         `json:"action"`
			Outcome   string         `json:"outcome"`
			Details   struct {
				Contention map[string]struct {
					Level     float64 `json:"level"`
					Contended bool    `json:"contended"`
				} `json:"contention"`
			} `json:"details"`
			None   *struct{ Culprit string } `json:"none"`
			Moirai *struct {
				Culprit          string `json:"culprit"`
				CulpritCancelled bool   `json:"culprit_cancelled"`
				InsertsCancelled int    `json:"inserts_cancelled"`
			} `json:"moirai"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, line.Type)
		switch line.Type {
		case "start":
			runs = append(runs, line.Run)
		case "refresh", "summary", "decision":
			if len(runs) == 0 || line.Run != runs[len(runs)-1] {
				t.Errorf("%s line of run %q within run %v", line.Type, line.Run, runs)
			}
		}
		if line.Type == "decision" {
			switch {
			case line.Run != RunMoirai || line.Class != classReport || line.Outcome != "acted":
				t.Errorf("decision %s: want decisions on the culprit only, in the run with moirai", sc.Text())
			case line.Action == "penalize":
				// pbox, before the culprit's next batch.
			case line.Action != "cancel" || !line.Details.Contention[TableLock].Contended:
				t.Errorf("decision %s: want the culprit's cancellation, with the contention of %s", sc.Text(), TableLock)
			default:
				cancels++
			}
		}
		if line.Type == "compare" {
			if line.None == nil || line.Moirai == nil || !line.Moirai.CulpritCancelled ||
				line.Moirai.InsertsCancelled != 0 || !strings.HasPrefix(line.None.Culprit, "completed") {
				t.Errorf("compare %s: want the culprit completed without control, cancelled with moirai", sc.Text())
			}
		}
		for _, r := range line.Resources {
			if r.Name == TableLock && r.Holders == 1 && len(r.HeldBy) == 1 {
				sawHolder = true
				if r.Waiters > 0 {
					sawWaiters = true
				}
			}
		}
		for _, tk := range line.Tasks {
			if tk.Class == classReport && len(tk.Holds) == 1 && tk.Holds[0].Resource == TableLock {
				sawCulprit = true
			}
		}
		if line.Type == "summary" {
			if err := json.Unmarshal(sc.Bytes(), &summaryLine); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := map[string]int{}
	for _, ty := range types {
		count[ty]++
	}
	if len(types) < 3 || types[0] != "start" || types[len(types)-1] != "compare" {
		t.Fatalf("line types %v: want start, refresh..., summary, start, ..., compare", types)
	}
	if count["start"] != 2 || count["summary"] != 2 || count["decision"] < 1 || count["refresh"] < 2 {
		t.Errorf("line types %v: want two runs, refreshes and a decision", count)
	}
	if !slices.Equal(runs, []string{RunNone, RunMoirai}) {
		t.Errorf("runs %v, want none then moirai", runs)
	}
	if cancels != 1 {
		t.Errorf("%d cancellations of the culprit, want 1", cancels)
	}
	if !sawHolder || !sawWaiters || !sawCulprit {
		t.Errorf("refreshes: holder %v, waiters %v, culprit holding %v; want all", sawHolder, sawWaiters, sawCulprit)
	}
	if _, ok := summaryLine["close_error"]; ok {
		t.Errorf("summary reports a close error: %v", summaryLine["close_error"])
	}
}

// --only runs one of the two, and prints no comparison.
func TestRunOnly(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cfg := shortConfig(&out, Table)
	cfg.Only = RunNone
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	if sum.Run != RunNone || sum.Baseline != nil || len(sum.Decisions) != 0 {
		t.Errorf("summary: run %q, baseline %v, %d decisions; want the run without control alone", sum.Run, sum.Baseline, len(sum.Decisions))
	}
	for _, re := range []string{`(?m)^=== run 1 of 1: without control`, `(?m)^moirai:\s+traces only`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output lacks %s", re)
		}
	}
	for _, s := range []string{"=== side by side", "--- decisions", "with moirai"} {
		if strings.Contains(text, s) {
			t.Errorf("output of one run contains %q", s)
		}
	}
	if t.Failed() {
		t.Log("\n" + text)
	}
}

// An interrupted run stops early, ends every task and leaks nothing (the
// goroutine check runs after all tests).
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	cfg := shortConfig(&out, Table)
	cfg.Duration = time.Minute
	start := time.Now()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("interrupted run took %v", el)
	}
	if !strings.Contains(out.String(), "closed cleanly") {
		t.Errorf("summary lacks a clean close:\n%s", out.String())
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Duration: DefaultDuration, Rate: DefaultRate, Interval: DefaultInterval}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string // substring; "" for no error
	}{
		{"defaults", func(*Config) {}, ""},
		{"minimum duration", func(c *Config) { c.Duration = MinDuration }, ""},
		{"too short", func(c *Config) { c.Duration = time.Second }, "--duration 1s is too short"},
		{"too long", func(c *Config) { c.Duration = 2 * time.Hour }, "--duration"},
		{"zero rate", func(c *Config) { c.Rate = 0 }, "--rate"},
		{"NaN rate", func(c *Config) { c.Rate = math.NaN() }, "--rate"},
		{"rate above max", func(c *Config) { c.Rate = MaxRate + 1 }, "--rate"},
		{"interval too small", func(c *Config) { c.Interval = time.Millisecond }, "--interval"},
		{"interval above duration", func(c *Config) { c.Interval = time.Minute }, "--interval"},
		{"unknown format", func(c *Config) { c.Format = 9 }, "format"},
		{"objective", func(c *Config) { c.SLO = 20 * time.Millisecond }, ""},
		{"objective too small", func(c *Config) { c.SLO = time.Microsecond }, "--slo"},
		{"negative objective", func(c *Config) { c.SLO = -time.Second }, "--slo"},
		{"only moirai", func(c *Config) { c.Only = RunMoirai }, ""},
		{"only none", func(c *Config) { c.Only = RunNone }, ""},
		{"only what", func(c *Config) { c.Only = "both" }, "--only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tt.wantErr)
			}
			if _, err := Run(context.Background(), c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Run: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestPlanFor(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want plan
	}{
		{2 * time.Second, plan{start: 500 * time.Millisecond, hold: 500 * time.Millisecond, batches: 2}},
		{5 * time.Second, plan{start: 1250 * time.Millisecond, hold: 1250 * time.Millisecond, batches: 2}},
		{10 * time.Second, plan{start: 2500 * time.Millisecond, hold: 1500 * time.Millisecond, batches: 4}},
	}
	for _, tt := range tests {
		got := planFor(tt.d)
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(plan{})); diff != "" {
			t.Errorf("planFor(%v) (-want +got):\n%s", tt.d, diff)
		}
		if end := got.start + time.Duration(got.batches)*got.hold; end > tt.d {
			t.Errorf("planFor(%v): culprit ends at %v, after the run", tt.d, end)
		}
	}
}

func TestParseReport(t *testing.T) {
	tests := []struct {
		query   string
		hold    time.Duration
		batches int
		wantErr bool
	}{
		{"hold=1.5s&batches=4", 1500 * time.Millisecond, 4, false},
		{"hold=1ms&batches=1", time.Millisecond, 1, false},
		{"", 0, 0, true},
		{"hold=0s&batches=1", 0, 0, true},
		{"hold=2m&batches=1", 0, 0, true},
		{"hold=1s&batches=0", 0, 0, true},
		{"hold=1s&batches=1001", 0, 0, true},
		{"hold=1s&batches=x", 0, 0, true},
		{"hold=-1s&batches=1", 0, 0, true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/report?"+tt.query, nil)
		hold, batches, err := parseReport(r)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseReport(%q): error %v, want error %v", tt.query, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && (hold != tt.hold || batches != tt.batches) {
			t.Errorf("parseReport(%q) = %v, %d; want %v, %d", tt.query, hold, batches, tt.hold, tt.batches)
		}
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add("hold=1.5s&batches=4")
	f.Add("hold=1h&batches=-1")
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("POST", "/report", nil)
		r.URL.RawQuery = query
		hold, batches, err := parseReport(r)
		if err == nil && (hold < time.Millisecond || hold > time.Minute || batches < 1 || batches > 1000) {
			t.Fatalf("parseReport(%q) = %v, %d: out of bounds", query, hold, batches)
		}
	})
}

func TestQuantile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var xs []time.Duration
	for i := 1; i <= 100; i++ {
		xs = append(xs, ms(i))
	}
	tests := []struct {
		xs   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{[]time.Duration{ms(3)}, 0.99, ms(3)},
		{xs, 0.5, ms(50)},
		{xs, 0.99, ms(99)},
		{xs, 1, ms(100)},
		{xs, 0, ms(1)},
	}
	for _, tt := range tests {
		if got := quantile(tt.xs, tt.q); got != tt.want {
			t.Errorf("quantile(%d values, %v) = %v, want %v", len(tt.xs), tt.q, got, tt.want)
		}
	}
}

// buildView is pure: it is tested on a hand-made snapshot.
func TestBuildView(t *testing.T) {
	s := &snapshot.Snapshot{
		At: 3 * time.Second,
		Resources: []snapshot.Resource{
			{ID: 1, Name: TableLock, Kind: resource.KindLock, Holders: 1, Waiters: 2,
				Wait: 900 * time.Millisecond, Hold: 2 * time.Second},
			{ID: 2, Name: "pool", Kind: resource.KindQueue, Capacity: 4},
		},
		Tasks: []snapshot.Task{
			{ID: 10, Class: classReport, Key: "report-job", Age: 1500 * time.Millisecond, Done: 1, Total: 4, First: 0, N: 1},
			{ID: 11, Class: classInsert, Key: "customer-1", Age: 500 * time.Millisecond, First: 1, N: 1},
			{ID: 12, Class: classInsert, Key: "customer-2", Age: 400 * time.Millisecond, First: 2, N: 1},
			{ID: 13, Class: classInsert, Key: "customer-3", Age: time.Millisecond, First: 3, N: 0},
		},
		Usage: []snapshot.Usage{
			{Task: 0, Res: 0, Usage: task.Usage{Resource: 1, Held: 1, Hold: 1200 * time.Millisecond}},
			{Task: 1, Res: 0, Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 500 * time.Millisecond}},
			{Task: 2, Res: 0, Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 400 * time.Millisecond}},
		},
	}
	prev := map[string]cumulative{TableLock: {wait: 100 * time.Millisecond, hold: 1500 * time.Millisecond}}
	got := buildView(s, prev, 2, 2500*time.Millisecond)
	want := View{
		Interval: 500 * time.Millisecond,
		Live:     4,
		Resources: []ResourceView{
			{Name: TableLock, Kind: "lock", Holders: 1, Waiters: 2,
				HeldBy: []Holder{{10, classReport}},
				Wait:   800 * time.Millisecond, Hold: 500 * time.Millisecond,
				TotalWait: 900 * time.Millisecond, TotalHold: 2 * time.Second},
			{Name: "pool", Kind: "queue"},
		},
		Tasks: []TaskView{
			{ID: 10, Class: classReport, Key: "report-job", Age: 1500 * time.Millisecond, Progress: 0.25,
				Holds: []Use{{TableLock, 1200 * time.Millisecond}}},
			{ID: 11, Class: classInsert, Key: "customer-1", Age: 500 * time.Millisecond, Progress: -1,
				Waits: []Use{{TableLock, 500 * time.Millisecond}}},
		},
		More: 1,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(TaskView{})); diff != "" {
		t.Errorf("buildView (-want +got):\n%s", diff)
	}
	if !got.holding(TableLock, classReport) || got.holding(TableLock, classInsert) || got.holding("pool", classReport) {
		t.Error("holding: wrong answer")
	}
	if diff := cmp.Diff(cumulative{wait: 900 * time.Millisecond, hold: 2 * time.Second}, prev[TableLock],
		cmp.AllowUnexported(cumulative{})); diff != "" {
		t.Errorf("prev not updated (-want +got):\n%s", diff)
	}
}

// A decision's details are printed one per line, a group of groups one
// member per line; in JSON they keep their order and nesting.
func TestDecisionRendering(t *testing.T) {
	attrs := []slog.Attr{
		slog.Group("contention",
			slog.Group(TableLock, slog.Float64("level", 0.5), slog.Int("waiters", 3), slog.Bool("contended", true)),
			slog.Group("pool", slog.Float64("level", 0), slog.Int("waiters", 0), slog.Bool("contended", false))),
		slog.Int("candidates", 2),
		slog.Group("excluded", slog.Int("no_gain", 1)),
		slog.Group("top",
			slog.Group("#1", slog.String("class", classReport), slog.Float64("score", 0.5), slog.Bool("chosen", true),
				slog.Group("gains", slog.Float64(TableLock, 1))),
			slog.Group("#2", slog.String("class", classInsert), slog.Duration("age", 1500*time.Microsecond))),
	}
	d := Decision{
		At: 1500 * time.Millisecond, Policy: "atropos", Action: "cancel", Outcome: "acted",
		Task: 9, Class: classReport, Key: "report-job", Reason: "frees the lock", Attrs: attrs,
	}
	var b strings.Builder
	writeDecision(&b, &d)
	want := `at 1.5s  atropos  acted: cancel task #9 "SELECT orders FOR UPDATE" (key report-job)
    why         frees the lock
    contention  table:orders: level=0.5 waiters=3 contended=true
                pool: level=0 waiters=0 contended=false
    candidates  2
    excluded    no_gain=1
    top         #1: class="SELECT orders FOR UPDATE" score=0.5 chosen=true gains[table:orders=1]
                #2: class="INSERT orders" age=1.5ms
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("writeDecision (-want +got):\n%s", diff)
	}
	if got, want := formatAttrs(attrs[2:3]), "excluded[no_gain=1]"; got != want {
		t.Errorf("formatAttrs = %q, want %q", got, want)
	}
	js, err := json.Marshal(jsonAttrs(attrs))
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"contention":{"table:orders":{"level":0.5,"waiters":3,"contended":true},"pool":{"level":0,"waiters":0,"contended":false}},` +
		`"candidates":2,"excluded":{"no_gain":1},` +
		`"top":{"#1":{"class":"SELECT orders FOR UPDATE","score":0.5,"chosen":true,"gains":{"table:orders":1}},"#2":{"class":"INSERT orders","age":1.5}}}`
	if string(js) != wantJSON {
		t.Errorf("jsonAttrs:\n got %s\nwant %s", js, wantJSON)
	}
}

// The comparison reads the two summaries; it is tested on hand-made ones.
func TestPrintCompare(t *testing.T) {
	cfg := Config{Duration: 6 * time.Second, Rate: 50, Seed: 1, Interval: DefaultInterval}
	none := &Summary{Run: RunNone, Sent: 300, OK: 300, P50: 40 * time.Millisecond, P99: 1500 * time.Millisecond,
		Max: 1510 * time.Millisecond, BehindCulprit: 150, CulpritBatches: 2, CulpritDone: 2, CulpritBatch: 2}
	with := &Summary{Run: RunMoirai, Sent: 300, OK: 299, Failed: 1, P50: time.Millisecond, P99: 20 * time.Millisecond,
		Max: 40 * time.Millisecond, BehindCulprit: 2, CulpritBatches: 2, CulpritDone: 0, CulpritBatch: 1,
		CulpritErr: "503 Service Unavailable: " + moirai.ErrCancelled.Error(),
		Decisions:  []Decision{{Outcome: "acted", Action: "cancel", Class: classReport}}}
	var out bytes.Buffer
	if err := printCompare(&out, cfg, none, with); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, re := range []string{
		`(?m)^inserts sent / ok / failed\s+300 / 300 / 0\s+300 / 299 / 1$`,
		`(?m)^insert latency p99\s+1\.5s\s+20ms$`,
		`(?m)^objective p99 ≤ 50ms\s+missed\s+met$`,
		`(?m)^culprit\s+completed 2 of 2 batches\s+cancelled by moirai in batch 1 of 2$`,
		`(?m)^cancelled: culprit / inserts\s+0 / 0\s+1 / 0$`,
		`(?m)^decisions\s+none \(traces only\)\s+1, 1 acted$`,
		`(?m)^  503 Service Unavailable: moirai: task cancelled`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("comparison lacks %s:\n%s", re, text)
		}
	}
	with.CulpritDone = 1
	if got, want := culpritWhere(with), "between batches 1 and 2 of 2"; got != want {
		t.Errorf("culpritWhere = %q, want %q", got, want)
	}
	out.Reset()
	cfg.Format = JSON
	if err := printCompare(&out, cfg, none, with); err != nil {
		t.Fatal(err)
	}
	var c struct {
		Type   string         `json:"type"`
		None   map[string]any `json:"none"`
		Moirai map[string]any `json:"moirai"`
	}
	if err := json.Unmarshal(out.Bytes(), &c); err != nil || c.Type != "compare" ||
		c.None["culprit_cancelled"] != false || c.Moirai["culprit_cancelled"] != true || c.Moirai["objective_met"] != true {
		t.Errorf("JSON comparison %s: %v", out.String(), err)
	}
}

package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

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
		{"second run", `(?m)^=== run 2 of 2: with moirai`},
		{"a decision with its reasons", `(?m)^at \S+\s+atropos\s+acted "SELECT orders FOR UPDATE"\n\s+why:\s+.*table:orders.*\n\s+details: contention\[`},
		{"side by side", `(?m)^=== side by side`},
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
	if base.CulpritBatches < 1 || base.CulpritErr != "" || len(base.Decisions) != 0 {
		t.Errorf("without control: culprit %d batches, error %q, %d decisions", base.CulpritBatches, base.CulpritErr, len(base.Decisions))
	}
	// With moirai the culprit is cancelled, and only it.
	if !sum.CulpritCancelled() || sum.CulpritErr == "" {
		t.Errorf("with moirai: culprit cancelled %v, error %q; want it cancelled", sum.CulpritCancelled(), sum.CulpritErr)
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
		sawHolder   bool
		sawWaiters  bool
		sawCulprit  bool
		summaryLine map[string]any
	)
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var line struct {
			Type      string         `json:"type"`
			Resources []jsonResource `json:"resources"`
			Tasks     []jsonTask     `json:"tasks"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, line.Type)
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
	if !sawHolder || !sawWaiters || !sawCulprit {
		t.Errorf("refreshes: holder %v, waiters %v, culprit holding %v; want all", sawHolder, sawWaiters, sawCulprit)
	}
	if _, ok := summaryLine["close_error"]; ok {
		t.Errorf("summary reports a close error: %v", summaryLine["close_error"])
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

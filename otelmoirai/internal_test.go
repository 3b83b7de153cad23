package otelmoirai

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

func TestSlogValueKeepsGroupsAsMaps(t *testing.T) {
	v := slogValue(slog.GroupValue(
		slog.Group("contention", slog.Group("table:orders", slog.Float64("level", 0.8), slog.Int("waiters", 3))),
		slog.Uint64("task", 7), slog.Duration("elapsed", 1500*time.Millisecond), slog.Bool("chosen", true), slog.String("class", "POST /x"),
	))
	if v.Type() != attribute.MAP {
		t.Fatalf("type %v, want MAP", v.Type())
	}
	want := `{"chosen":true,"class":"POST /x","contention":{"table:orders":{"level":0.8,"waiters":3}},"elapsed":"1.5s","task":7}`
	if got := v.String(); got != want {
		t.Errorf("Emit = %s\nwant   %s", got, want)
	}
}

func TestPickPrefersTheActedDecision(t *testing.T) {
	recs := []policy.Record{
		{Seq: 1, Decision: policy.Decision{Action: policy.Cancel}, Outcome: policy.Acted},
		{Seq: 2, Decision: policy.Decision{Action: policy.Penalize}, Outcome: policy.Acted},
		{Seq: 3, Decision: policy.Decision{Action: policy.Cancel}, Outcome: policy.Skipped},
	}
	if r := pick(recs, policy.Cancel); r == nil || r.Seq != 1 {
		t.Errorf("pick(cancel) = %+v, want seq 1", r)
	}
	if r := pick(recs[2:], policy.Cancel); r == nil || r.Seq != 3 {
		t.Errorf("pick(cancel) without an acted one = %+v, want seq 3", r)
	}
	if r := pick(recs, policy.Diagnose); r != nil {
		t.Errorf("pick(diagnose) = %+v, want nil", r)
	}
}

// TestRejectWriterKnowsAdmissionFromOther503s: only httpmw's admission
// rejection (its level header and its body) is taken for one; the body
// is pinned to httpmw's text by the rejection test in otelmoirai/test.
func TestRejectWriterKnowsAdmissionFromOther503s(t *testing.T) {
	for _, tc := range []struct {
		name, level, body string
		code              int
		want              string
	}{
		{"admission", "3/17", string(admissionBody), 503, "3/17"},
		{"fence", "3/17", "overloaded: path's line full", 503, ""},
		{"cancelled", "3/17", "overloaded", 503, ""},
		{"no header", "", string(admissionBody), 503, ""},
		{"ok", "3/17", string(admissionBody), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := httptest.NewRecorder()
			w := &rejectWriter{ResponseWriter: rr}
			if tc.level != "" {
				w.Header().Set(httpmw.HeaderLevel, tc.level)
			}
			http.Error(w, tc.body, tc.code)
			if w.level != tc.want {
				t.Errorf("level %q, want %q", w.level, tc.want)
			}
			if w.Unwrap() != rr {
				t.Error("Unwrap does not return the wrapped writer")
			}
		})
	}
}

func TestVersionOfADevelopmentBuild(t *testing.T) {
	if v := Version(); v != "devel" {
		t.Errorf("Version() = %q in the module's own test, want devel", v)
	}
}

func TestInstrumentTiesOneController(t *testing.T) {
	tel := New()
	a := moirai.New(moirai.WithoutMechanisms())
	defer a.Close()
	b := moirai.New(moirai.WithoutMechanisms())
	defer b.Close()
	if err := tel.Instrument(nil); err == nil {
		t.Error("Instrument(nil) succeeded")
	}
	if err := tel.Instrument(a); err != nil {
		t.Fatal(err)
	}
	if err := tel.Instrument(a); err != nil {
		t.Errorf("Instrument of the same controller again: %v", err)
	}
	if n := len(tel.regs); n != 1 {
		t.Errorf("%d registrations, want 1", n)
	}
	if err := tel.Instrument(b); err == nil {
		t.Error("Instrument of a second controller succeeded")
	}
	if err := tel.Close(); err != nil || len(tel.regs) != 0 {
		t.Errorf("Close = %v, %d registrations left", err, len(tel.regs))
	}
	if err := tel.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// refusingMeter refuses every instrument recorded as things happen,
// returning nil as a meter may.
type refusingMeter struct{ noop.Meter }

func (refusingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("refused")
}

func (refusingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errors.New("refused")
}

// A meter that refuses the instruments gets its errors back, and the
// instruments record nothing rather than panic.
func TestSyncInstrumentsRefused(t *testing.T) {
	s, err := newSyncInstruments(refusingMeter{})
	if err == nil {
		t.Error("no error from a meter that refused every instrument")
	}
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{s.cancellations, s.penalties, s.diagnoses} {
		c.Add(ctx, 1)
	}
	for _, h := range []metric.Float64Histogram{s.loss, s.penalty, s.wait, s.hold} {
		h.Record(ctx, 1)
	}
}

package test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/otelmoirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// overloaded returns a DAGOR admitter whose level rejects the lowest
// priority and admits the highest.
func overloaded(t *testing.T) *admit.DAGOR {
	d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10))
	for range 30 {
		for range 10 {
			d.AdmitPriority(0, moirai.Priority{})
			d.AdmitPriority(0, httpmw.Lowest)
			d.Started(0, time.Second)
		}
	}
	if d.Level().Admits(httpmw.Lowest) || !d.Level().Admits(moirai.Priority{}) {
		t.Fatalf("level %v: setup failed", d.Level())
	}
	return d
}

// TestRejectedRequestSpanCarriesTheLevel: a request httpmw's admission
// control rejects (no task begins) gets the reject action and the level
// on its span from the Handler outside httpmw; an admitted one gets
// nothing; the admitter's metrics read the level and the rejection.
func TestRejectedRequestSpanCarriesTheLevel(t *testing.T) {
	s := newSDK()
	defer s.shutdown()
	tel := s.telemetry()
	ctl := newController(tel, moirai.WithoutMechanisms())
	defer ctl.Close()
	d := overloaded(t)
	if err := tel.Instrument(ctl); err != nil {
		t.Fatal(err)
	}
	if err := tel.InstrumentAdmission("http", d); err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	before := make(map[int]int64)
	var rej [admit.BusinessLevels]int64
	d.RejectedInto(&rej)
	for b, n := range rej {
		before[b] = n
	}
	mux := http.NewServeMux()
	mux.Handle("GET /feed", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	mux.Handle("GET /pay", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	srv := s.server(tel.Handler(httpmw.Handler(ctl, mux, httpmw.WithAdmission(d),
		httpmw.WithPriority(func(r *http.Request) moirai.Priority {
			if r.URL.Path == "/pay" {
				return moirai.Priority{}
			}
			return httpmw.Lowest
		}))))
	if c := serve(srv, "GET", "/feed").Code; c != http.StatusServiceUnavailable {
		t.Fatalf("lowest priority answered %d, want 503", c)
	}
	if c := serve(srv, "GET", "/pay").Code; c != http.StatusOK {
		t.Fatalf("top priority answered %d, want 200", c)
	}
	span := s.serverSpan(t, "/feed")
	got := moiraiAttrs(span.Attributes())
	if got["moirai.action"].AsString() != "reject" || got["moirai.policy"].AsString() != "admission" ||
		got["moirai.admission.level"].AsString() != admit.FormatLevel(d.Level()) || span.Status().Code != codes.Error {
		t.Errorf("rejected span: %v, status %v; want reject at level %s", got, span.Status(), admit.FormatLevel(d.Level()))
	}
	if got := moiraiAttrs(s.serverSpan(t, "/pay").Attributes()); len(got) != 0 {
		t.Errorf("admitted span carries %v", got)
	}
	ms := s.metrics(t)
	gauge := ms[otelmoirai.MetricAdmissionBusiness].Data.(metricdata.Gauge[int64]).DataPoints
	if len(gauge) != 1 || gauge[0].Value != int64(d.Level().Business) || attr(gauge[0].Attributes.ToSlice(), otelmoirai.AttrAdmitter).AsString() != "http" {
		t.Errorf("%s = %+v, want %d for admitter http", otelmoirai.MetricAdmissionBusiness, gauge, d.Level().Business)
	}
	lowest := int64(httpmw.Lowest.Business)
	var n int64
	for _, dp := range ms[otelmoirai.MetricAdmissionRejected].Data.(metricdata.Sum[int64]).DataPoints {
		if attr(dp.Attributes.ToSlice(), otelmoirai.AttrBusiness).AsInt64() == lowest {
			n = dp.Value
		}
	}
	if n != before[int(lowest)]+1 {
		t.Errorf("%s{business=%d} = %d, want %d", otelmoirai.MetricAdmissionRejected, lowest, n, before[int(lowest)]+1)
	}
}

// TestReexecutionSpanLinksTheRunItReplaces: with httpmw's re-execution,
// the cancelled first run's span (the server span) carries the
// cancellation, and the re-execution runs under a child span linked to
// it, naming the task it replaces; the request is answered 200.
func TestReexecutionSpanLinksTheRunItReplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK()
		defer s.shutdown()
		tel := s.telemetry()
		ctl := newController(tel, moirai.WithDetector(waiting{}), moirai.WithPolicy(cancel.NewAtropos(cancel.MultiObjective)))
		defer ctl.Close()
		if err := tel.Instrument(ctl); err != nil {
			t.Fatal(err)
		}
		defer tel.Close()
		// A POST runs twice only when its route says it is safe to.
		srv := ordersService(s, ctl, tel, httpmw.WithReexecution(moirai.RetryQuiet(0), moirai.RetryMaxWait(time.Minute)), httpmw.WithReexecutable("POST /report"))
		done := make(chan int)
		go func() { done <- serve(srv, "POST", "/report").Code }()
		synctest.Wait()
		if c := serve(srv, "GET", "/orders").Code; c != http.StatusOK {
			t.Errorf("victim answered %d", c)
		}
		if c := <-done; c != http.StatusOK {
			t.Fatalf("re-executed report answered %d, want 200", c)
		}
		ds := ctl.Decisions()
		if len(ds) != 1 || ds[0].Action != policy.Cancel || ds[0].Outcome != policy.Acted {
			t.Fatalf("decisions: %+v", ds)
		}
		server := s.serverSpan(t, "/report")
		if a := moiraiAttrs(server.Attributes()); a["moirai.action"].AsString() != "cancel" || a["moirai.task.id"].AsInt64() != int64(ds[0].Task) {
			t.Errorf("server span: %v, want the cancellation of task %d", a, ds[0].Task)
		}
		var re []string
		for _, sp := range s.spans.Ended() {
			if sp.Name() != otelmoirai.ReexecutionSpanName {
				continue
			}
			re = append(re, sp.Name())
			if sp.Parent().SpanID() != server.SpanContext().SpanID() || sp.SpanContext().TraceID() != server.SpanContext().TraceID() {
				t.Errorf("re-execution span's parent %v, want the server span %v", sp.Parent().SpanID(), server.SpanContext().SpanID())
			}
			links := sp.Links()
			if len(links) != 1 || !links[0].SpanContext.Equal(server.SpanContext()) || attr(links[0].Attributes, otelmoirai.AttrReplaces).AsInt64() != int64(ds[0].Task) {
				t.Errorf("re-execution span's links %+v, want one to the cancelled run's span", links)
			}
			if a := attr(sp.Attributes(), otelmoirai.AttrReplaces).AsInt64(); a != int64(ds[0].Task) {
				t.Errorf("re-execution replaces %d, want %d", a, ds[0].Task)
			}
			if id := attr(sp.Attributes(), otelmoirai.AttrTaskID).AsInt64(); id == int64(ds[0].Task) || id == 0 {
				t.Errorf("re-execution's task id %d, want a task of its own", id)
			}
		}
		if len(re) != 1 {
			t.Fatalf("%d re-execution spans, want 1", len(re))
		}
		var n int64
		for _, dp := range s.metrics(t)[otelmoirai.MetricReexecutions].Data.(metricdata.Sum[int64]).DataPoints {
			if attr(dp.Attributes.ToSlice(), otelmoirai.AttrResult).AsString() == "reexecuted" {
				n = dp.Value
			}
		}
		if n != 1 {
			t.Errorf("%s{reexecuted} = %d, want 1", otelmoirai.MetricReexecutions, n)
		}
	})
}

// penalizeClass penalizes, once, the first task of class it sees.
type penalizeClass struct {
	class string
	delay time.Duration
	done  bool
}

func (p *penalizeClass) Name() string { return "test-penalty" }
func (p *penalizeClass) Decide(s *snapshot.Snapshot) []policy.Decision {
	if p.done {
		return nil
	}
	for _, t := range s.Tasks {
		if t.Class == p.class {
			p.done = true
			return []policy.Decision{{Action: policy.Penalize, Task: t.ID, Class: t.Class, Delay: p.delay, Resource: "table:orders", Reason: "defers others"}}
		}
	}
	return nil
}

// TestPenalizedRequestSpanCarriesThePenaltyServed: a penalized request's
// span carries the time it served and the penalty's decision, and the
// penalty histogram records it.
func TestPenalizedRequestSpanCarriesThePenaltyServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK()
		defer s.shutdown()
		tel := s.telemetry()
		ctl := newController(tel, moirai.WithPolicy(&penalizeClass{class: "GET /export", delay: 40 * time.Millisecond}))
		defer ctl.Close()
		if err := tel.Instrument(ctl); err != nil {
			t.Fatal(err)
		}
		defer tel.Close()
		mux := http.NewServeMux()
		mux.Handle("GET /export", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tk := moirai.From(r.Context())
			for range 100 { // a loop of work with a safe point per round
				time.Sleep(10 * time.Millisecond)
				if err := tk.Pause(r.Context()); err != nil {
					return
				}
			}
		})))
		srv := s.server(tel.Handler(httpmw.Handler(ctl, mux)))
		if c := serve(srv, "GET", "/export").Code; c != http.StatusOK {
			t.Fatalf("answered %d", c)
		}
		a := moiraiAttrs(s.serverSpan(t, "/export").Attributes())
		if a["moirai.penalty.served"].AsFloat64() != 0.04 || a["moirai.action"].AsString() != "penalize" ||
			a["moirai.penalty.delay"].AsFloat64() != 0.04 || a["moirai.resource"].AsString() != "table:orders" {
			t.Errorf("span: %v, want 40ms served of a 40ms penalty on table:orders", a)
		}
		h := s.metrics(t)[otelmoirai.MetricPenaltyDuration].Data.(metricdata.Histogram[float64]).DataPoints
		if len(h) != 1 || h[0].Count != 1 || h[0].Sum != 0.04 || attr(h[0].Attributes.ToSlice(), otelmoirai.AttrClass).AsString() != "GET /export" {
			t.Errorf("%s = %+v, want one 40ms penalty of GET /export", otelmoirai.MetricPenaltyDuration, h)
		}
	})
}

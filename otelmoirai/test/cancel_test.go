package test

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/otelmoirai"
	"github.com/moirai-go/moirai/snapshot"
)

// waiting fires while any task waits for a resource: the tests' stand-in
// for the SLO detector, so that Atropos decides as soon as the culprit
// makes others wait.
type waiting struct{}

func (waiting) Name() string { return "waiting" }
func (waiting) Detect(s *snapshot.Snapshot) (bool, string) {
	for _, r := range s.Resources {
		if r.Waiters > 0 {
			return true, r.Name + " has waiters"
		}
	}
	return false, ""
}

// ordersService is a service with otelhttp, httpmw and otelmoirai: POST
// /report holds the orders table's lock until its context ends (or, as
// a re-execution, for a second), GET /orders takes it briefly.
func ordersService(s *sdk, ctl *moirai.Controller, tel *otelmoirai.Telemetry, opts ...httpmw.Option) http.Handler {
	orders := ctl.Mutex("table:orders")
	mux := http.NewServeMux()
	mux.Handle("POST /report", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := orders.Lock(ctx); err != nil {
			return
		}
		defer orders.Unlock()
		hold := time.Hour
		if _, ok := moirai.ReexecutionOf(ctx); ok {
			hold = time.Second
		}
		select {
		case <-ctx.Done(): // cancelled: unanswered, httpmw answers 503
		case <-time.After(hold):
			w.Write([]byte("report\n"))
		}
	})))
	mux.Handle("GET /orders", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := orders.Lock(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		time.Sleep(time.Millisecond)
		orders.Unlock()
		w.Write([]byte("orders\n"))
	})))
	return s.server(tel.Handler(httpmw.Handler(ctl, mux, append([]httpmw.Option{httpmw.WithCancellable(true)}, opts...)...)))
}

// TestCancelledRequestSpanCarriesTheDecision: a culprit request holds a
// lock others wait for; Atropos cancels it. Its exported server span
// carries the decision and an Error status, the victims' spans carry
// nothing of moirai, the decision log and the live page carry the
// culprit's trace id, the decision event is correlated with its span,
// and the metrics read through a manual reader under the documented
// names.
func TestCancelledRequestSpanCarriesTheDecision(t *testing.T) {
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
		srv := ordersService(s, ctl, tel)

		var culprit int
		done := make(chan struct{})
		go func() { culprit = serve(srv, "POST", "/report").Code; close(done) }()
		synctest.Wait() // the report holds the lock
		var wg sync.WaitGroup
		answers := make([]int, 4)
		for i := range answers {
			wg.Go(func() { answers[i] = serve(srv, "GET", "/orders").Code })
		}
		<-done
		wg.Wait()
		if culprit != http.StatusServiceUnavailable {
			t.Fatalf("culprit answered %d, want 503", culprit)
		}
		for i, c := range answers {
			if c != http.StatusOK {
				t.Errorf("victim %d answered %d, want 200", i, c)
			}
		}

		ds := ctl.Decisions()
		if len(ds) != 1 || ds[0].Outcome.String() != "acted" {
			t.Fatalf("decisions: %+v", ds)
		}
		d := ds[0]
		span := s.serverSpan(t, "/report")
		got := moiraiAttrs(span.Attributes())
		want := map[string]any{
			"moirai.action":           "cancel",
			"moirai.policy":           d.Policy,
			"moirai.resource":         "table:orders",
			"moirai.task.class":       "POST /report",
			"moirai.task.id":          int64(d.Task),
			"moirai.decision.outcome": "acted",
			"moirai.reason":           d.Reason,
		}
		for k, v := range want {
			if g := got[attributeKey(k)].AsInterface(); g != v {
				t.Errorf("span attribute %s = %v, want %v", k, g, v)
			}
		}
		if g := got["moirai.gain"].AsFloat64(); g <= 0 || g != d.Gain {
			t.Errorf("moirai.gain = %v, want the decision's %v > 0", g, d.Gain)
		}
		if l := got["moirai.loss"].AsFloat64(); l <= 0 || l != d.Lost {
			t.Errorf("moirai.loss = %v, want the record's %v > 0", l, d.Lost)
		}
		// otelhttp sets its own Error status for the 503 after the
		// handler returns, and with it an empty description: the reason
		// stays in moirai.reason.
		if st := span.Status(); st.Code != codes.Error {
			t.Errorf("status = %+v, want Error", st)
		}
		tid := span.SpanContext().TraceID().String()
		if d.TraceID != tid {
			t.Errorf("decision's trace id %q, want the culprit span's %q", d.TraceID, tid)
		}
		if v := debugpage.Collect(ctl, debugpage.Config{}); len(v.Decisions) != 1 || v.Decisions[0].TraceID != tid {
			t.Errorf("live page decisions %+v, want the culprit's trace id", v.Decisions)
		}
		for _, sp := range s.spans.Ended() {
			if sp.SpanContext().SpanID() != span.SpanContext().SpanID() && len(moiraiAttrs(sp.Attributes())) > 0 {
				t.Errorf("span %s of %v carries %v", sp.Name(), attr(sp.Attributes(), "url.path").AsString(), moiraiAttrs(sp.Attributes()))
			}
		}

		logs := s.logs.all()
		if len(logs) != 1 {
			t.Fatalf("%d decision events, want 1", len(logs))
		}
		ev := logs[0]
		if ev.EventName() != otelmoirai.EventName || ev.TraceID() != span.SpanContext().TraceID() || ev.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("event %q trace %v span %v, want %q on the culprit's span", ev.EventName(), ev.TraceID(), ev.SpanID(), otelmoirai.EventName)
		}
		if recordAttr(&ev, "moirai.action").AsString() != "cancel" || ev.Body().AsString() != d.Reason || recordAttr(&ev, otelmoirai.AttrDetails).Type().String() != "MAP" {
			t.Errorf("event attributes: action %v, body %v, details %v", recordAttr(&ev, "moirai.action"), ev.Body(), recordAttr(&ev, otelmoirai.AttrDetails))
		}

		ms := s.metrics(t)
		sum := func(name string, match map[string]string) int64 {
			m, ok := ms[name]
			if !ok {
				t.Errorf("metric %s missing", name)
				return -1
			}
			var n int64
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if matches(dp.Attributes.ToSlice(), match) {
					n += dp.Value
				}
			}
			return n
		}
		if n := sum(otelmoirai.MetricCancellations, map[string]string{"moirai.decision.outcome": "acted", "moirai.task.class": "POST /report", "moirai.resource": "table:orders", "moirai.policy": d.Policy}); n != 1 {
			t.Errorf("%s{acted, POST /report, table:orders} = %d, want 1", otelmoirai.MetricCancellations, n)
		}
		if n := sum(otelmoirai.MetricTasks, map[string]string{"moirai.result": "error"}); n != 1 {
			t.Errorf("%s{error} = %d, want 1", otelmoirai.MetricTasks, n)
		}
		if n := sum(otelmoirai.MetricTasks, map[string]string{"moirai.result": "ok"}); n != 4 {
			t.Errorf("%s{ok} = %d, want 4", otelmoirai.MetricTasks, n)
		}
		if n := sum(otelmoirai.MetricResourceWaits, map[string]string{"moirai.resource": "table:orders"}); n != 4 {
			t.Errorf("%s{table:orders} = %d, want 4", otelmoirai.MetricResourceWaits, n)
		}
		wait := ms[otelmoirai.MetricResourceWaitTime].Data.(metricdata.Sum[float64]).DataPoints
		if len(wait) != 1 || wait[0].Value <= 0 || ms[otelmoirai.MetricResourceWaitTime].Unit != "s" {
			t.Errorf("%s = %+v, want the lock's wait in seconds", otelmoirai.MetricResourceWaitTime, wait)
		}
		count := func(name string, match map[string]string) (n uint64) {
			for _, dp := range ms[name].Data.(metricdata.Histogram[float64]).DataPoints {
				if matches(dp.Attributes.ToSlice(), match) {
					n += dp.Count
				}
			}
			return n
		}
		if n := count(otelmoirai.MetricResourceWaitDur, map[string]string{"moirai.resource": "table:orders", "moirai.task.class": "GET /orders"}); n != 4 {
			t.Errorf("%s{table:orders, GET /orders} counts %d tasks, want the 4 that waited", otelmoirai.MetricResourceWaitDur, n)
		}
		if n := count(otelmoirai.MetricResourceWaitDur, map[string]string{"moirai.task.class": "POST /report"}); n != 0 {
			t.Errorf("%s{POST /report} counts %d tasks, want 0: the report never waited", otelmoirai.MetricResourceWaitDur, n)
		}
		if n := count(otelmoirai.MetricResourceHoldDur, map[string]string{"moirai.resource": "table:orders"}); n != 5 {
			t.Errorf("%s{table:orders} counts %d tasks, want all 5", otelmoirai.MetricResourceHoldDur, n)
		}
		loss := ms[otelmoirai.MetricCancellationLoss].Data.(metricdata.Histogram[float64]).DataPoints
		if len(loss) != 1 || loss[0].Count != 1 || loss[0].Sum != d.Lost {
			t.Errorf("%s = %+v, want one observation of %v", otelmoirai.MetricCancellationLoss, loss, d.Lost)
		}
		if traceID := span.SpanContext().TraceID(); len(loss) == 1 && len(loss[0].Exemplars) > 0 && loss[0].Exemplars[0].TraceID != nil &&
			string(loss[0].Exemplars[0].TraceID) != string(traceID[:]) {
			t.Errorf("loss exemplar's trace %x, want the culprit's %s", loss[0].Exemplars[0].TraceID, tid)
		}
	})
}

// matches reports whether kvs has every key of want with its value.
func matches(kvs []attributeKV, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, kv := range kvs {
			if string(kv.Key) == k && kv.Value.String() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

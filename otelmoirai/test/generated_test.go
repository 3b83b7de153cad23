package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/otelmoirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// randomPolicy cancels and penalizes live tasks at random: the
// generator's decisions, which no test chose.
type randomPolicy struct {
	mu     sync.Mutex
	rng    *rand.Rand
	picked map[uint64]bool
}

func (p *randomPolicy) Name() string { return "random" }
func (p *randomPolicy) Decide(s *snapshot.Snapshot) []policy.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []policy.Decision
	for _, t := range s.Tasks {
		if p.picked[t.ID] {
			continue
		}
		switch x := p.rng.Float64(); {
		case x < 0.04:
			p.picked[t.ID] = true
			ds = append(ds, policy.Decision{Action: policy.Cancel, Task: t.ID, Resource: "pool", Gain: p.rng.Float64(), Reason: fmt.Sprintf("random pick %d", t.ID)})
		case x < 0.08:
			p.picked[t.ID] = true
			ds = append(ds, policy.Decision{Action: policy.Penalize, Task: t.ID, Class: t.Class, Resource: "pool",
				Delay: time.Duration(1+p.rng.IntN(20)) * time.Millisecond, Reason: "random penalty"})
		}
	}
	return ds
}

// truth is what a request's task saw from its own goroutine.
type truth struct {
	id        uint64
	class     string
	cancelled bool
	served    time.Duration
}

// TestGeneratedRequestsSpansMatchWhatTheirTasksSaw: seeded, replayable
// runs of requests on three route patterns, cancelled and penalized at
// random by a policy; each request's task records, from its own
// goroutine, whether it was cancelled and the penalty it served. Every
// server span must say exactly that (a cancellation with its task id,
// class pattern and Error status; the penalty served), no other span
// carries moirai attributes, each acted cancellation's record and event
// point to its request's trace and span, and the metrics carry route
// patterns, never paths.
func TestGeneratedRequestsSpansMatchWhatTheirTasksSaw(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runGenerated(t, seed) })
		})
	}
}

func runGenerated(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	s := newSDK()
	defer s.shutdown()
	tel := s.telemetry()
	pol := &randomPolicy{rng: rand.New(rand.NewPCG(seed, 7)), picked: map[uint64]bool{}}
	ctl := newController(tel, moirai.WithPolicy(pol), moirai.WithMinCancelInterval(0), moirai.WithDecisionLog(4096))
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	pool := ctl.Mutex("pool")

	var mu sync.Mutex
	truths := map[string]truth{} // by path
	patterns := []string{"GET /a/{n}", "GET /b/{n}", "POST /c/{n}"}
	mux := http.NewServeMux()
	for _, pat := range patterns {
		mux.Handle(pat, tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			tk := moirai.From(ctx)
			var rounds int
			fmt.Sscan(r.Header.Get("Rounds"), &rounds)
			for range rounds {
				if err := pool.Lock(ctx); err != nil {
					break
				}
				time.Sleep(time.Millisecond)
				pool.Unlock()
				if tk.Pause(ctx) != nil {
					break
				}
			}
			mu.Lock()
			truths[r.URL.Path] = truth{id: tk.ID(), class: tk.Spec().Class,
				cancelled: errors.Is(context.Cause(ctx), moirai.ErrCancelled), served: moirai.PenaltyServed(tk)}
			mu.Unlock()
		})))
	}
	srv := s.server(httpmw.Handler(ctl, mux, httpmw.WithCancellable(true)))

	const n = 60
	var wg sync.WaitGroup
	for i := range n {
		pat := patterns[rng.IntN(len(patterns))]
		method, prefix, _ := strings.Cut(strings.TrimSuffix(pat, "{n}"), " ")
		rounds := 1 + rng.IntN(30)
		time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
		wg.Go(func() {
			newRecorderRequest(srv, method, fmt.Sprintf("%s%d", prefix, i), rounds)
		})
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond) // the loop publishes the last decisions
	synctest.Wait()

	if len(truths) != n {
		t.Fatalf("%d requests recorded, want %d", len(truths), n)
	}
	cancelled, penalized := 0, 0
	spanOf := map[uint64][2]string{} // task id → trace id, span id
	for path, tr := range truths {
		sp := s.serverSpan(t, path)
		a := moiraiAttrs(sp.Attributes())
		spanOf[tr.id] = [2]string{sp.SpanContext().TraceID().String(), sp.SpanContext().SpanID().String()}
		if tr.cancelled {
			cancelled++
			if a["moirai.action"].AsString() != "cancel" || a["moirai.task.id"].AsInt64() != int64(tr.id) ||
				a["moirai.task.class"].AsString() != tr.class || a["moirai.reason"].AsString() != fmt.Sprintf("random pick %d", tr.id) ||
				a["moirai.resource"].AsString() != "pool" || a["moirai.decision.outcome"].AsString() != "acted" || sp.Status().Code != codes.Error {
				t.Errorf("%s: task %d was cancelled; span %v, status %v", path, tr.id, a, sp.Status())
			}
		} else if a["moirai.action"].AsString() == "cancel" {
			t.Errorf("%s: task %d was not cancelled; span %v", path, tr.id, a)
		}
		if tr.served > 0 {
			penalized++
			if got := a["moirai.penalty.served"].AsFloat64(); got != tr.served.Seconds() {
				t.Errorf("%s: task %d served %v; span says %v", path, tr.id, tr.served, got)
			}
		} else if _, ok := a["moirai.penalty.served"]; ok {
			t.Errorf("%s: task %d served nothing; span %v", path, tr.id, a)
		}
		if !tr.cancelled && tr.served == 0 && len(a) > 0 {
			t.Errorf("%s: task %d untouched; span %v", path, tr.id, a)
		}
	}
	t.Logf("seed %d: %d requests, %d cancelled, %d penalized, %d decisions", seed, n, cancelled, penalized, len(ctl.Decisions()))
	if cancelled == 0 || penalized == 0 {
		t.Fatalf("seed %d: %d cancelled, %d penalized: the generator decided too little", seed, cancelled, penalized)
	}

	acted := 0
	ds := ctl.Decisions()
	for _, d := range ds {
		if d.Action != policy.Cancel || d.Outcome != policy.Acted {
			continue
		}
		acted++
		if ids, ok := spanOf[d.Task]; !ok || d.TraceID != ids[0] {
			t.Errorf("cancellation of task %d: trace id %q, want its request's %q", d.Task, d.TraceID, ids[0])
		}
	}
	if acted != cancelled {
		t.Errorf("%d acted cancellations in the log, %d tasks saw one", acted, cancelled)
	}
	events := s.logs.all()
	if len(events) != len(ds) {
		t.Errorf("%d decision events, %d decisions", len(events), len(ds))
	}
	for i := range events {
		ev := &events[i]
		if recordAttr(ev, "moirai.action").AsString() != "cancel" || recordAttr(ev, "moirai.decision.outcome").AsString() != "acted" {
			continue
		}
		id := uint64(recordAttr(ev, "moirai.task.id").AsInt64())
		if ids := spanOf[id]; ev.TraceID().String() != ids[0] || ev.SpanID().String() != ids[1] {
			t.Errorf("event on task %d: trace %s span %s, want %v", id, ev.TraceID(), ev.SpanID(), ids)
		}
	}

	ms := s.metrics(t)
	var actedMetric int64
	for _, dp := range ms[otelmoirai.MetricCancellations].Data.(metricdata.Sum[int64]).DataPoints {
		if attr(dp.Attributes.ToSlice(), otelmoirai.AttrOutcome).AsString() == "acted" {
			actedMetric += dp.Value
		}
	}
	if actedMetric != int64(cancelled) {
		t.Errorf("%s{acted} = %d, want %d", otelmoirai.MetricCancellations, actedMetric, cancelled)
	}
	var pen uint64
	for _, dp := range ms[otelmoirai.MetricPenaltyDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		pen += dp.Count
	}
	if pen != uint64(penalized) {
		t.Errorf("%s count = %d, want %d penalized tasks", otelmoirai.MetricPenaltyDuration, pen, penalized)
	}
	// Low cardinality: no attribute of any moirai metric names a path.
	for name, m := range ms {
		if !strings.HasPrefix(name, "moirai.") {
			continue
		}
		for _, kvs := range pointAttrs(m) {
			for _, kv := range kvs {
				if v := kv.Value.String(); strings.Contains(v, "/") && !strings.Contains(v, "{n}") {
					t.Errorf("%s has attribute %s=%q", name, kv.Key, v)
				}
			}
		}
	}
}

// newRecorderRequest serves a request with the Rounds header.
func newRecorderRequest(h http.Handler, method, path string, rounds int) int {
	w := newRecorder()
	r := newRequest(method, path)
	r.Header.Set("Rounds", fmt.Sprint(rounds))
	h.ServeHTTP(w, r)
	return w.Code
}

// pointAttrs returns the attribute sets of m's data points.
func pointAttrs(m metricdata.Metrics) [][]attributeKV {
	var out [][]attributeKV
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes.ToSlice())
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes.ToSlice())
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes.ToSlice())
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes.ToSlice())
		}
	}
	return out
}

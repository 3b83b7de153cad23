package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// cancelClass cancels, once, every live task of a class: a stand-in for a
// real policy's decision.
type cancelClass struct {
	class string
	done  atomic.Bool
}

func (p *cancelClass) Name() string { return "test" }

func (p *cancelClass) Decide(s *snapshot.Snapshot) []policy.Decision {
	if p.done.Load() {
		return nil
	}
	var ds []policy.Decision
	for _, t := range s.Tasks {
		if t.Class == p.class && t.Cancellable {
			ds = append(ds, policy.Decision{Action: policy.Cancel, Task: t.ID, Reason: "test"})
			p.done.Store(true)
		}
	}
	return ds
}

func newCtl(p policy.Policy) *moirai.Controller {
	return moirai.New(moirai.WithPolicy(p), moirai.WithTick(10*time.Millisecond, 10*time.Millisecond),
		moirai.WithMinCancelInterval(0))
}

func TestTaskPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		var seen *moirai.Task
		serve := func(w http.ResponseWriter, r *http.Request) {
			seen = moirai.From(r.Context())
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			io.WriteString(w, "ok")
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/orders", serve)
		mux.HandleFunc("/fail", serve)
		h := httpmw.Handler(ctl, mux, httpmw.WithKey(func(r *http.Request) string { return r.Header.Get("X-Tenant") }))
		req := httptest.NewRequest("GET", "/orders", nil)
		req.Header.Set("X-Tenant", "acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Body.String() != "ok" {
			t.Fatalf("answer %d %q", rec.Code, rec.Body)
		}
		if seen == nil || seen.Spec().Class != "GET /orders" || seen.Spec().Key != "acme" || !seen.Spec().Cancellable {
			t.Fatalf("task %+v", seen.Spec())
		}
		if !taskx.Ended(seen) {
			t.Errorf("task not ended after the handler returned")
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fail", nil))
		var tot task.Totals
		ctl.Tasks().TotalsInto(&tot)
		if tot.Ended != 2 || tot.Failed != 1 {
			t.Errorf("totals %d ended, %d failed: want 2 ended, 1 failed (the 502)", tot.Ended, tot.Failed)
		}
	})
}

func TestPanicEndsTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		h := httpmw.Handler(ctl, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("the panic must reach net/http as without the middleware")
				}
			}()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
		var tot task.Totals
		ctl.Tasks().TotalsInto(&tot)
		if st := ctl.Stats(); st.Live != 0 || tot.Failed != 1 {
			t.Errorf("%d live, %d failed: the panicking request's task must end, failed", st.Live, tot.Failed)
		}
	})
}

// blockUntilCancelled is a handler whose first run waits for its context;
// later runs answer at once.
func blockUntilCancelled(runs *atomic.Int32, bodies chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		if runs.Add(1) == 1 {
			// A header set, then the run gives up, answering nothing:
			// the header must never be sent.
			w.Header().Set("X-Partial", "yes")
			<-r.Context().Done()
			return
		}
		if moirai.From(r.Context()).Spec().Cancellable {
			http.Error(w, "a re-execution must not be cancellable", 500)
			return
		}
		io.WriteString(w, "done:"+string(b))
	})
}

func TestCancelledWithoutReexecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newCtl(&cancelClass{class: "POST /report"})
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 4)
		mux := http.NewServeMux()
		mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			<-r.Context().Done()
		})
		h := httpmw.Handler(ctl, mux)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/report", strings.NewReader("x")))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || runs.Load() != 1 {
			t.Errorf("answer %d %v after %d runs; want one run and 503 with Retry-After", rec.Code, rec.Header(), runs.Load())
		}
		close(bodies)
	})
}

func TestReexecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newCtl(&cancelClass{class: "report"})
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 4)
		var notified atomic.Bool
		h := httpmw.Handler(ctl, blockUntilCancelled(&runs, bodies),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			httpmw.WithReexecutable(),
			httpmw.WithReexecution(moirai.RetryQuiet(50*time.Millisecond),
				moirai.RetryNotify(func(time.Duration) { notified.Store(true) })))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/report", strings.NewReader("payload")))
		if rec.Code != 200 || rec.Body.String() != "done:payload" || rec.Header().Get("X-Partial") != "" {
			t.Fatalf("answer %d %q %v; want the second run's answer only", rec.Code, rec.Body, rec.Header())
		}
		if runs.Load() != 2 || <-bodies != "payload" || <-bodies != "payload" || !notified.Load() {
			t.Errorf("%d runs; want 2, both reading the body", runs.Load())
		}
		if st := ctl.RetryStats(); st.Cancelled != 1 || st.Reexecuted != 1 || st.Dropped != 0 {
			t.Errorf("retry stats %+v", st)
		}
	})
}

func TestReexecutionDroppedPastObjective(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newCtl(&cancelClass{class: "report"})
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 4)
		h := httpmw.Handler(ctl, blockUntilCancelled(&runs, bodies),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			// The first run lasts ~10 ms until cancelled, so the retry is
			// expected to take 20 ms: past a 15 ms objective.
			httpmw.WithReexecutable(),
			httpmw.WithReexecution(moirai.RetryWithin(15*time.Millisecond)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/report", nil))
		if rec.Code != http.StatusServiceUnavailable || runs.Load() != 1 {
			t.Fatalf("answer %d after %d runs; want 503 after one", rec.Code, runs.Load())
		}
		if st := ctl.RetryStats(); st.Dropped != 1 || st.Reexecuted != 0 {
			t.Errorf("retry stats %+v", st)
		}
	})
}

func TestLargeBodyServedWithoutReexecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		var got string
		h := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got = string(b)
		}), httpmw.WithReexecution(), httpmw.WithMaxBody(4))
		req := httptest.NewRequest("POST", "/", strings.NewReader("0123456789"))
		req.ContentLength = -1 // unknown: read to find out
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got != "0123456789" {
			t.Errorf("handler read %q; the prefix read while buffering must not be lost", got)
		}
	})
}

// alwaysFiring keeps the controller in overload: a re-execution waits.
type alwaysFiring struct{}

func (alwaysFiring) Name() string                             { return "always" }
func (alwaysFiring) Detect(*snapshot.Snapshot) (bool, string) { return true, "test" }

func TestClientGoneWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithPolicy(&cancelClass{class: "report"}), moirai.WithDetector(alwaysFiring{}),
			moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 4)
		h := httpmw.Handler(ctl, blockUntilCancelled(&runs, bodies),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			httpmw.WithReexecutable(), httpmw.WithReexecution(moirai.RetryMaxWait(10*time.Second)))
		ctx, cancel := context.WithCancelCause(context.Background())
		errGone := errors.New("client gone")
		time.AfterFunc(time.Second, func() { cancel(errGone) })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/report", nil).WithContext(ctx))
		if runs.Load() != 1 || ctl.RetryStats().Interrupted != 1 {
			t.Errorf("%d runs, stats %+v; want the wait given up when the client left", runs.Load(), ctl.RetryStats())
		}
	})
}

package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/task"
)

// begun returns how many tasks ctl's registry has begun.
func begun(ctl *moirai.Controller) uint64 {
	var tot task.Totals
	ctl.Tasks().TotalsInto(&tot)
	return tot.Begun
}

// An inner Handler nested under an outer one, as the package's usage nests
// one per route: one task per request, whatever the depth, and the inner
// layer's own options applied to it.
func TestNestedReusesOuterTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		var seen []moirai.Spec
		var tasks []*moirai.Task
		record := func(w http.ResponseWriter, r *http.Request) {
			tk := moirai.From(r.Context())
			tasks = append(tasks, tk)
			seen = append(seen, tk.Spec())
		}
		mux := http.NewServeMux()
		mux.Handle("POST /report", httpmw.Handler(ctl, http.HandlerFunc(record),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			httpmw.WithObjective(5*time.Second),
			httpmw.WithBackground(),
			httpmw.WithCancellable(true)))
		mux.Handle("GET /plain", httpmw.Handler(ctl, http.HandlerFunc(record))) // no options of its own
		mux.Handle("GET /deep", httpmw.Handler(ctl, httpmw.Handler(ctl, http.HandlerFunc(record),
			httpmw.WithObjective(moirai.NoObjective)), httpmw.WithKey(func(*http.Request) string { return "k" })))
		mux.HandleFunc("GET /unwrapped", record)
		h := httpmw.Handler(ctl, mux, httpmw.WithCancellable(false), httpmw.WithObjective(20*time.Millisecond, "GET /plain"))

		for _, req := range []*http.Request{
			httptest.NewRequest("POST", "/report", strings.NewReader("x")),
			httptest.NewRequest("GET", "/plain", nil),
			httptest.NewRequest("GET", "/deep", nil),
			httptest.NewRequest("GET", "/unwrapped", nil),
		} {
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		if n := begun(ctl); n != 4 {
			t.Fatalf("%d tasks begun for 4 requests; want one each", n)
		}
		want := []moirai.Spec{
			{Class: "report", Kind: moirai.Background, Objective: 5 * time.Second, Cancellable: true, MaxDeferral: task.DefaultGoal, Goal: task.DefaultGoal},
			{Class: "GET /plain", Kind: moirai.Request, Objective: 20 * time.Millisecond, MaxDeferral: task.DefaultGoal, Goal: task.DefaultGoal},
			{Class: "GET /deep", Key: "k", Kind: moirai.Request, Objective: moirai.NoObjective, MaxDeferral: task.DefaultGoal, Goal: task.DefaultGoal},
			{Class: "GET /unwrapped", Kind: moirai.Request, MaxDeferral: task.DefaultGoal, Goal: task.DefaultGoal},
		}
		for i, w := range want {
			seen[i].Priority = moirai.Priority{} // the priority is admission's, not under test here
			if seen[i] != w {
				t.Errorf("request %d: task spec %+v; want %+v", i, seen[i], w)
			}
		}
	})
}

// An inner Handler with re-execution re-executes the outer task's work:
// the first run is the outer task, refined; the re-execution a task of its
// own; the answer the second run's.
func TestNestedReexecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newCtl(&cancelClass{class: "report"})
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 4)
		type key struct{}
		mux := http.NewServeMux()
		var sawValue atomic.Int32
		check := blockUntilCancelled(&runs, bodies)
		inner := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Context().Value(key{}) == "v" {
				sawValue.Add(1)
			}
			check.ServeHTTP(w, r)
		}),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			httpmw.WithReexecutable(),
			httpmw.WithReexecution(moirai.RetryQuiet(50*time.Millisecond)))
		// A layer in between adds a value: both runs see it.
		mux.Handle("POST /report", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "v")))
		}))
		h := httpmw.Handler(ctl, mux)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/report", strings.NewReader("payload")))
		if rec.Code != 200 || rec.Body.String() != "done:payload" || rec.Header().Get("X-Partial") != "" {
			t.Fatalf("answer %d %q %v; want the second run's answer only", rec.Code, rec.Body, rec.Header())
		}
		if runs.Load() != 2 || sawValue.Load() != 2 {
			t.Errorf("%d runs, %d saw the value added between the layers; want 2 and 2", runs.Load(), sawValue.Load())
		}
		// The outer task (the first run) and the re-execution: two tasks,
		// never two at work at once.
		if n := begun(ctl); n != 2 {
			t.Errorf("%d tasks begun; want 2 (the request's, then its re-execution)", n)
		}
		if st := ctl.RetryStats(); st.Cancelled != 1 || st.Reexecuted != 1 || st.Completed != 1 {
			t.Errorf("retry stats %+v", st)
		}
		if st := ctl.Stats(); st.Live != 0 {
			t.Errorf("%d tasks live after the request", st.Live)
		}
	})
}

// The body of a cancelled request's 503 says only that the server is
// overloaded, unless WithExposedCause; the cause reaches the handler
// either way.
func TestCancelledBody(t *testing.T) {
	for _, expose := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ctl := newCtl(&cancelClass{class: "POST /report"})
			defer ctl.Close()
			var cause error
			mux := http.NewServeMux()
			mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				cause = context.Cause(r.Context())
			})
			var opts []httpmw.Option
			if expose {
				opts = append(opts, httpmw.WithExposedCause())
			}
			rec := httptest.NewRecorder()
			httpmw.Handler(ctl, mux, opts...).ServeHTTP(rec, httptest.NewRequest("POST", "/report", nil))
			if !errors.Is(cause, moirai.ErrCancelled) || !strings.Contains(cause.Error(), "test") {
				t.Fatalf("cause %v; want moirai.ErrCancelled with the policy's reason", cause)
			}
			body := strings.TrimSpace(rec.Body.String())
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d", rec.Code)
			}
			if expose != strings.Contains(body, cause.Error()) || !strings.HasPrefix(body, "server overloaded") {
				t.Errorf("exposed %v: body %q (cause %q)", expose, body, cause)
			}
		})
	}
}

// Re-execution in both layers: the outer one re-executes, the inner one
// leaves it to it; the work runs twice, not three or four times.
func TestNestedReexecutionInBothLayers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newCtl(&cancelClass{class: "report"})
		defer ctl.Close()
		var runs atomic.Int32
		bodies := make(chan string, 8)
		mux := http.NewServeMux()
		mux.Handle("PUT /report", httpmw.Handler(ctl, blockUntilCancelled(&runs, bodies),
			httpmw.WithClass(func(*http.Request) string { return "report" }),
			httpmw.WithReexecution(moirai.RetryQuiet(50*time.Millisecond))))
		h := httpmw.Handler(ctl, mux, httpmw.WithReexecution(moirai.RetryQuiet(50*time.Millisecond)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/report", strings.NewReader("payload")))
		if rec.Code != 200 || rec.Body.String() != "done:payload" {
			t.Fatalf("answer %d %q; want the second run's", rec.Code, rec.Body)
		}
		if runs.Load() != 2 {
			t.Errorf("%d runs; want 2: one re-execution", runs.Load())
		}
		if st := ctl.RetryStats(); st.Cancelled != 1 || st.Reexecuted != 1 {
			t.Errorf("retry stats %+v", st)
		}
	})
}

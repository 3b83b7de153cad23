package moiraiprom_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/integrations/prometheus/moiraiprom"
	"github.com/moirai-go/moirai/integrations/prometheus/moiraiprom/progress"
)

// fakeTracker is a promql.QueryTracker of n slots that records its calls.
type fakeTracker struct {
	n      int
	mu     sync.Mutex
	active map[int]string
	next   int
	closed bool
}

func newFake(n int) *fakeTracker { return &fakeTracker{n: n, active: map[int]string{}} }

func (f *fakeTracker) GetMaxConcurrent() int { return f.n }

func (f *fakeTracker) Insert(_ context.Context, q string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.active) >= f.n {
		return 0, errors.New("fake: over its slots")
	}
	f.next++
	f.active[f.next] = q
	return f.next, nil
}

func (f *fakeTracker) Delete(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, i)
}

func (f *fakeTracker) Close() error { f.closed = true; return nil }

func (f *fakeTracker) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.active)
}

func newController(t *testing.T) *moirai.Controller {
	t.Helper()
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() {
		if err := ctl.Close(); err != nil {
			t.Error(err)
		}
	})
	return ctl
}

func TestNewTrackerRefusesBadInput(t *testing.T) {
	ctl := newController(t)
	if _, err := moiraiprom.NewTracker(nil, newFake(1)); err == nil {
		t.Error("nil controller accepted")
	}
	if _, err := moiraiprom.NewTracker(ctl, nil); err == nil {
		t.Error("nil tracker accepted")
	}
	if _, err := moiraiprom.NewTracker(ctl, newFake(0)); err == nil {
		t.Error("a tracker of no slot accepted")
	}
	if _, err := moiraiprom.NewTracker(ctl, newFake(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := moiraiprom.NewTracker(ctl, newFake(2)); err == nil {
		t.Error("a second tracker on one controller accepted (one resource name)")
	}
}

func TestTrackerHoldsItsSlots(t *testing.T) {
	ctl := newController(t)
	inner := newFake(2)
	tr, err := moiraiprom.NewTracker(ctl, inner)
	if err != nil {
		t.Fatal(err)
	}
	if tr.GetMaxConcurrent() != 2 || tr.Semaphore().Size() != 2 {
		t.Fatalf("slots %d, semaphore %d; want 2 and 2", tr.GetMaxConcurrent(), tr.Semaphore().Size())
	}
	ctx := context.Background()
	a, err := tr.Insert(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Insert(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() {
		_, err := tr.Insert(ctx, "c")
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a third query took a slot of two: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	tr.Delete(a)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	if inner.len() != 2 || tr.Semaphore().InUse() != 2 {
		t.Errorf("inner has %d queries, semaphore %d units in use; want 2 and 2", inner.len(), tr.Semaphore().InUse())
	}
	// A wait that its context ends fails as a cancelled query, which the
	// API answers as the engine answers one cancelled while it runs.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = tr.Insert(cctx, "d")
	var qc promql.ErrQueryCanceled
	if !errors.As(err, &qc) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait ended by its context: %v, want a promql.ErrQueryCanceled wrapping the cause", err)
	}
	if err := tr.Close(); err != nil || !inner.closed {
		t.Errorf("Close: %v, inner closed %v", err, inner.closed)
	}
}

func TestRoute(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/query":          "query",
		"/api/v1/query_range":    "query_range",
		"/api/v1/label/x/values": "other",
		"/api/v1/":               "other",
		"/metrics":               "other",
	} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if got := moiraiprom.Route(r); got != want {
			t.Errorf("Route(%s) = %q, want %q", path, got, want)
		}
	}
}

// Handler makes each request a task of its route's class; only range
// queries are cancellable.
func TestHandlerClassesAndCancellable(t *testing.T) {
	ctl := newController(t)
	type seen struct {
		class       string
		cancellable bool
	}
	got := make(chan seen, 1)
	h := moiraiprom.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := moirai.From(r.Context()).Spec()
		got <- seen{s.Class, s.Cancellable}
	}))
	for path, want := range map[string]seen{
		"/api/v1/query":       {"query", false},
		"/api/v1/query_range": {"query_range", true},
		"/api/v1/series":      {"series", false},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
		if s := <-got; s != want {
			t.Errorf("%s: class %q cancellable %v, want %q %v", path, s.class, s.cancellable, want.class, want.cancellable)
		}
	}
}

// Report is safe with or without a task, and says it was called: a
// binary whose engine never calls it is the released one.
func TestProgressReported(t *testing.T) {
	ctl := newController(t)
	ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "query_range", Cancellable: true})
	defer task.End(nil)
	progress.Report(ctx, 3, 4)
	progress.Report(context.Background(), 1, 2)
	if !progress.Reported() {
		t.Error("Reported is false after a Report")
	}
}

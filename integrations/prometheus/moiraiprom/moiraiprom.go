// Package moiraiprom makes the query slots of Prometheus's PromQL engine a
// moirai semaphore, and each API request a moirai task.
//
// The engine runs at most --query.max-concurrency queries at once: a query
// takes a slot of its QueryTracker (promql.ActiveQueryTracker in the
// released server) before it is evaluated and gives it back when it is
// done; the others wait for a slot in arrival order. A few heavy queries
// (a dashboard's panels over many series and hours) take every slot for
// as long as they run, and every light query (another dashboard's, an
// alerting rule's) waits behind them. [NewTracker] wraps the engine's
// tracker so that a slot is a unit of a moirai semaphore, taken with the
// query's context: the controller sees who holds the slots and who waits,
// and cancels the holder that makes the others wait, through the query's
// context, which the engine checks at every step of its evaluation.
// promql.EngineOpts takes the tracker as is (ActiveQueryTracker): no patch
// line makes the slots a moirai resource.
//
// integrations/prometheus/prometheus.patch adds what the engine cannot be
// given from outside: its evaluation loops report their progress to the
// query's task (steps done of the query's steps, series done of a range
// function's series), so that the controller can tell what cancelling a
// query frees.
//
// [Handler] makes each request of the HTTP API a task (package httpmw),
// whose class is the API's route, so that moirai learns what a range query
// costs apart from the instant queries; only range queries are
// cancellable (see Handler).
package moiraiprom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/promql"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/resource"
)

// ResourceName is the query slots' resource.
const ResourceName = "prometheus/query-slots"

// Tracker is a promql.QueryTracker whose slots are a moirai semaphore. It
// keeps the tracker it wraps (the active query log, which Prometheus reads
// back after a crash) and takes one of its indices per query, so it never
// holds more slots than the wrapped tracker has.
type Tracker struct {
	inner promql.QueryTracker
	sem   *resource.Semaphore

	mu      sync.Mutex
	permits map[int]resource.Permit // by the wrapped tracker's index; at most its slots
}

// NewTracker returns inner with its GetMaxConcurrent slots accounted to a
// semaphore of ctl named [ResourceName]. It fails if inner is nil or has
// no slot, or if ctl already has a resource of that name.
func NewTracker(ctl *moirai.Controller, inner promql.QueryTracker) (*Tracker, error) {
	if ctl == nil || inner == nil {
		return nil, errors.New("moiraiprom: NewTracker needs a controller and a tracker")
	}
	n := inner.GetMaxConcurrent()
	if n < 1 {
		return nil, fmt.Errorf("moiraiprom: the tracker has %d slots", n)
	}
	r, err := ctl.Register(ResourceName, moirai.KindQueue, int64(n))
	if err != nil {
		return nil, err
	}
	return &Tracker{inner: inner, sem: resource.NewSemaphore(r, int64(n)), permits: make(map[int]resource.Permit, n)}, nil
}

// GetMaxConcurrent returns the slots.
func (t *Tracker) GetMaxConcurrent() int { return t.inner.GetMaxConcurrent() }

// Insert waits for a slot for the query in ctx, charged to its task, then
// logs the query in the wrapped tracker. A wait the controller ends, or
// that ctx ends, fails as a cancelled query (promql.ErrQueryCanceled),
// which the API answers as the engine answers a query cancelled while it
// runs.
func (t *Tracker) Insert(ctx context.Context, query string) (int, error) {
	p, err := t.sem.Acquire(ctx, 1)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", promql.ErrQueryCanceled("query queue"), err)
	}
	i, err := t.inner.Insert(ctx, query)
	if err != nil {
		_ = p.Release()
		return 0, err
	}
	t.mu.Lock()
	t.permits[i] = p
	t.mu.Unlock()
	return i, nil
}

// Delete gives the query's slot back.
func (t *Tracker) Delete(index int) {
	t.inner.Delete(index)
	t.mu.Lock()
	p, ok := t.permits[index]
	delete(t.permits, index)
	t.mu.Unlock()
	if ok {
		_ = p.Release()
	}
}

// Close closes the wrapped tracker.
func (t *Tracker) Close() error { return t.inner.Close() }

// Semaphore returns the slots' semaphore.
func (t *Tracker) Semaphore() *resource.Semaphore { return t.sem }

// Handler wraps the HTTP API's handler (its routes under /api/v1/) so that
// each request is a task of ctl (httpmw.Handler) whose class is its route
// ("query", "query_range", "series", ...). Only range queries are
// cancellable: they are the requests that hold a slot for long, and a
// cancelled one frees the slot at the next step of its evaluation; an
// instant query evaluates one step. opts may say otherwise (they are
// httpmw's, applied after these).
func Handler(ctl *moirai.Controller, api http.Handler, opts ...httpmw.Option) http.Handler {
	// The inner Handler, nested in the outer one for the same controller,
	// refines the request's task rather than beginning another.
	ranges := httpmw.Handler(ctl, api, append([]httpmw.Option{httpmw.WithCancellable(true)}, opts...)...)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Route(r) == "query_range" {
			ranges.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	return httpmw.Handler(ctl, route, append([]httpmw.Option{httpmw.WithClass(Route), httpmw.WithCancellable(false)}, opts...)...)
}

// Route returns the API route of r: the path's last element under
// /api/v1/ ("query", "query_range", ...), or "other".
func Route(r *http.Request) string {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "other"
	}
	return rest
}

package main

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/prometheus/prometheus/promql"

	"github.com/moirai-go/moirai/integrations/prometheus/moiraiprom"
)

// errOracle is the cause of the queries the oracle cancels.
var errOracle = errors.New("promload: cancelled by the oracle")

// oracle is the run "oracle": the bound of any controller that acts on
// evidence. It knows the culprit by construction (every range query is
// the dashboard's) and, the moment a query that is not a range query
// finds every slot taken while a range query holds one, cancels the range
// query that took its slot last, through its context, as moirai would.
// A controller that must first see a wait to know there is contention
// cannot act sooner; what the victims still lose under the oracle is what
// no such controller can give back (the waits until the first one, the
// step the cancelled query finishes, the CPUs the heavy query left running
// shares with them).
type oracle struct {
	inner promql.QueryTracker

	mu        sync.Mutex
	free      int           // slots not taken; negative: queries waiting
	holding   []*heavyQuery // range queries holding a slot, in the order they took it
	cancelled int           // range queries cancelled
}

// heavyQuery is a range query's request, as the oracle's handler marks it.
type heavyQuery struct {
	cancel context.CancelCauseFunc
	index  int
}

type heavyKey struct{}

func newOracle(inner promql.QueryTracker) *oracle {
	return &oracle{inner: inner, free: inner.GetMaxConcurrent()}
}

// handler marks each range query's request for the oracle, with the
// cancel function of a context of its own.
func (o *oracle) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if moiraiprom.Route(r) == "query_range" {
			ctx, cancel := context.WithCancelCause(r.Context())
			defer cancel(nil)
			r = r.WithContext(context.WithValue(ctx, heavyKey{}, &heavyQuery{cancel: cancel}))
		}
		next.ServeHTTP(w, r)
	})
}

func (o *oracle) GetMaxConcurrent() int { return o.inner.GetMaxConcurrent() }

// Insert takes a slot for the query in ctx, first cancelling the range
// query that took a slot last if this query, not a range query, is about
// to wait for one.
func (o *oracle) Insert(ctx context.Context, query string) (int, error) {
	h, _ := ctx.Value(heavyKey{}).(*heavyQuery)
	o.mu.Lock()
	if o.free <= 0 && h == nil && len(o.holding) > 0 {
		last := o.holding[len(o.holding)-1]
		o.holding = o.holding[:len(o.holding)-1]
		last.cancel(errOracle)
		o.cancelled++
	}
	o.free--
	o.mu.Unlock()
	i, err := o.inner.Insert(ctx, query)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.free++
		return 0, err
	}
	if h != nil {
		h.index = i
		o.holding = append(o.holding, h)
	}
	return i, nil
}

// Delete gives the query's slot back.
func (o *oracle) Delete(index int) {
	o.inner.Delete(index)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.free++
	for k, h := range o.holding {
		if h.index == index {
			o.holding = append(o.holding[:k], o.holding[k+1:]...)
			break
		}
	}
}

func (o *oracle) Close() error { return o.inner.Close() }

// Cancelled returns how many range queries the oracle cancelled.
func (o *oracle) Cancelled() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cancelled
}

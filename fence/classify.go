package fence

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Classifier learns which path each kind of request takes, from the
// downstream calls its handlers make: a request's path is the downstream
// its kind (a server method, an HTTP route) spends the most time calling.
// A kind seen calling nothing is local. The server middleware asks
// [Classifier.PathOf] before a request takes a permit; the client
// middleware tells [Classifier.Observe] of each downstream call, which it
// finds through the request's context ([WithCaller]).
//
// Why the most time: a handler that calls several downstreams holds its
// worker for as long as the slowest of them, so it is that downstream's
// stalls that must be fenced in; a handler calling a fast D2 then a slow
// D1 belongs to D1's path. Times are decayed (halved once a kind has
// seen a minute of calls), so a kind whose calls change moves to its new
// path. A Classifier is safe for concurrent use.
type Classifier struct {
	f      *Fence
	routes atomic.Pointer[map[string]*Path] // kind → path; copied on write

	mu    sync.Mutex
	spent map[string]map[string]time.Duration // kind → downstream path name → time
}

// decayAt is the total call time a kind accumulates before its times are
// halved.
const decayAt = time.Minute

// NewClassifier returns a classifier of requests into f's paths.
func NewClassifier(f *Fence) *Classifier {
	c := &Classifier{f: f, spent: map[string]map[string]time.Duration{}}
	m := map[string]*Path{}
	c.routes.Store(&m)
	return c
}

// Fence returns the fence the classifier classifies into.
func (c *Classifier) Fence() *Fence { return c.f }

// PathOf returns the path learned for kind, or the local reservation if
// the kind has not been seen calling a downstream. One map load.
func (c *Classifier) PathOf(kind string) *Path {
	if p, ok := (*c.routes.Load())[kind]; ok {
		return p
	}
	return c.f.local
}

// Observe records that a request of kind spent d calling the downstream
// path named path. A path the fence does not know counts as the fence's
// fallback ([Fence.Path]).
func (c *Classifier) Observe(kind, path string, d time.Duration) {
	if d < 0 || path == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.spent[kind]
	if m == nil {
		m = map[string]time.Duration{}
		c.spent[kind] = m
	}
	m[path] += d + 1 // a call of no measurable length still counts
	var total time.Duration
	best, bestT := "", time.Duration(-1)
	for name, t := range m {
		total += t
		if t > bestT || (t == bestT && name < best) {
			best, bestT = name, t
		}
	}
	if total > decayAt {
		for name := range m {
			m[name] /= 2
		}
	}
	p := c.f.Path(best)
	if cur := *c.routes.Load(); cur[kind] != p {
		next := make(map[string]*Path, len(cur)+1)
		for k, v := range cur {
			next[k] = v
		}
		next[kind] = p
		c.routes.Store(&next)
	}
}

// Routes returns the learned path of every kind seen calling a
// downstream, by kind.
func (c *Classifier) Routes() map[string]string {
	cur := *c.routes.Load()
	out := make(map[string]string, len(cur))
	for k, p := range cur {
		out[k] = p.name
	}
	return out
}

type callerKey struct{}

type caller struct {
	c    *Classifier
	kind string
}

// WithCaller returns a context that tells client middleware that calls
// made with it are made by a request of kind, classified by c.
func WithCaller(ctx context.Context, c *Classifier, kind string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{c, kind})
}

// Tracked reports whether ctx is a request's whose downstream calls a
// classifier learns from (see [WithCaller]); client middleware measures a
// call's duration only then.
func Tracked(ctx context.Context) bool {
	cl, ok := ctx.Value(callerKey{}).(caller)
	return ok && cl.c != nil
}

// ObserveCall records, for the request whose context ctx is (see
// [WithCaller]), that it spent d calling the downstream path named path.
// It does nothing for a context without a caller.
func ObserveCall(ctx context.Context, path string, d time.Duration) {
	if cl, ok := ctx.Value(callerKey{}).(caller); ok && cl.c != nil {
		cl.c.Observe(cl.kind, path, d)
	}
}

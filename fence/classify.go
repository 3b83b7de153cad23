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
//
// # Bounds
//
// Kinds usually come from requests (a route, a method name), so a
// classifier learns at most [MaxKinds] of them and forgets none: a kind
// first seen once the cap is reached is not learned and stays on the
// local path, and each of its calls is counted ([Classifier.Dropped]).
// Downstreams are counted per fence path, never per name, so a kind's
// record is bounded by the fence's paths. Learning a new kind costs one
// map insertion, never a copy of the routes.
type Classifier struct {
	f      *Fence
	routes sync.Map // kind → *Path; read without a lock by PathOf

	mu      sync.Mutex
	spent   map[string]map[*Path]time.Duration // kind → downstream path → time
	dropped atomic.Int64
}

// MaxKinds is how many kinds a [Classifier] learns at most.
const MaxKinds = 1024

// decayAt is the total call time a kind accumulates before its times are
// halved.
const decayAt = time.Minute

// NewClassifier returns a classifier of requests into f's paths.
func NewClassifier(f *Fence) *Classifier {
	return &Classifier{f: f, spent: map[string]map[*Path]time.Duration{}}
}

// Fence returns the fence the classifier classifies into.
func (c *Classifier) Fence() *Fence { return c.f }

// PathOf returns the path learned for kind, or the local reservation if
// the kind has not been seen calling a downstream (or was seen only once
// [MaxKinds] kinds were learned). One lock-free map load.
func (c *Classifier) PathOf(kind string) *Path {
	if p, ok := c.routes.Load(kind); ok {
		return p.(*Path)
	}
	return c.f.local
}

// Dropped returns how many calls were not learned because their kind was
// new once the classifier had learned [MaxKinds] kinds.
func (c *Classifier) Dropped() int64 { return c.dropped.Load() }

// Observe records that a request of kind spent d calling the downstream
// path named path. A path the fence does not know counts as the fence's
// fallback ([Fence.Path]). A new kind past [MaxKinds] is not learned; the
// call is counted in [Classifier.Dropped].
func (c *Classifier) Observe(kind, path string, d time.Duration) {
	if d < 0 || path == "" {
		return
	}
	p := c.f.Path(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.spent[kind]
	if m == nil {
		if len(c.spent) >= MaxKinds {
			c.dropped.Add(1)
			return
		}
		m = map[*Path]time.Duration{}
		c.spent[kind] = m
	}
	m[p] += d + 1 // a call of no measurable length still counts
	var total time.Duration
	var best *Path
	bestT := time.Duration(-1)
	for q, t := range m {
		total += t
		if t > bestT || (t == bestT && q.name < best.name) {
			best, bestT = q, t
		}
	}
	if total > decayAt {
		for q := range m {
			m[q] /= 2
		}
	}
	if cur, ok := c.routes.Load(kind); !ok || cur.(*Path) != best {
		c.routes.Store(kind, best)
	}
}

// Routes returns the learned path of every kind seen calling a
// downstream, by kind.
func (c *Classifier) Routes() map[string]string {
	out := map[string]string{}
	c.routes.Range(func(k, p any) bool {
		out[k.(string)] = p.(*Path).name
		return true
	})
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

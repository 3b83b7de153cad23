package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/internal/waitq"
	"github.com/moirai-go/moirai/resource"
)

// LocalName is the name of the local reservation, the one requests that
// call no downstream take.
const LocalName = "local"

// ErrRejected is the cause of an Acquire refused because the line of its
// reservation is full (see [WithBacklog]).
var ErrRejected = errors.New("fence: line full")

// ErrZeroPermit is returned by Release on a Permit no Acquire returned.
var ErrZeroPermit = errors.New("fence: release of a zero Permit")

// Reservation names a downstream path and the permits reserved for it.
type Reservation struct {
	Name    string
	Permits int
}

// An Option configures a Fence.
type Option func(*config)

type config struct {
	backlog  int64
	fallback string
	res      *resource.Resource
}

// WithBacklog bounds the line of each reservation: an Acquire that finds
// n requests of its reservation already waiting is refused at once with
// [ErrRejected] (a dropped request, rather than one that would time out
// in the line). 0, the default, leaves the lines unbounded.
func WithBacklog(n int) Option {
	return func(c *config) { opt.Set(&c.backlog, int64(n), n > 0) }
}

// WithFallback names the reservation that [Fence.Path] returns for a name
// the fence does not know (default: the local reservation). Each such
// lookup is counted in [Stats].Unknown.
func WithFallback(name string) Option { return func(c *config) { c.fallback = name } }

// WithResource accounts the fence's waits and holds to r, per task, as a
// [resource.Queue] does: the other mechanisms of moirai (targeted
// cancellation, penalties) then see who waits for the fence's workers and
// who holds them. It costs a context lookup per Acquire and Release.
func WithResource(r *resource.Resource) Option { return func(c *config) { c.res = r } }

// Fence is a pool of workers split into reservations: one per downstream
// path and a local one. A request of a path runs only on a permit of its
// path's reservation, so requests stuck on a slow downstream hold at most
// that reservation and the other paths keep their workers. Local requests
// run on the local reservation first and, when it is full, borrow a free
// permit of the path with the fewest permits in use; a permit that comes
// free goes to a waiting local request before the waiters of its own path.
//
// A Fence is safe for concurrent use. It must be created by [New].
type Fence struct {
	size    int64
	backlog int64
	res     *resource.Resource

	local    *Path
	paths    []*Path // downstream paths, in configuration order
	byName   map[string]*Path
	fallback *Path

	unknown atomic.Int64
	misuse  atomic.Int64

	mu sync.Mutex // guards the waiters' queues and resizing
}

// Path is a reservation of a Fence: a downstream path's or the local one.
// Resolve it once with [Fence.Path] or [Fence.Local] and keep it: Acquire
// then costs no lookup by name.
type Path struct {
	f     *Fence
	name  string
	index int // in f.paths, -1 for the local reservation

	limit atomic.Int64 // permits reserved
	used  atomic.Int64 // permits of this reservation held, by its own requests or lent to local ones
	lent  atomic.Int64 // of which lent to local requests now
	nwait atomic.Int64 // requests of this path waiting

	completed atomic.Int64 // requests of this path that released their permit
	borrowed  atomic.Int64 // local requests that ran on this reservation's permit
	waited    atomic.Int64 // requests of this path that had to wait
	rejected  atomic.Int64 // requests of this path refused: line full

	q waitQueue // guarded by f.mu
}

// New returns a fence of size workers with a reservation per path; the
// local reservation gets the workers the paths leave. It refuses
// reservations that sum above size, duplicate or empty names, the name
// [LocalName], and permits below 1.
func New(size int, paths []Reservation, opts ...Option) (*Fence, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if size < 1 {
		return nil, fmt.Errorf("fence: pool of %d workers: want at least 1", size)
	}
	f := &Fence{size: int64(size), backlog: c.backlog, res: c.res, byName: make(map[string]*Path, len(paths)+1)}
	f.local = &Path{f: f, name: LocalName, index: -1}
	f.byName[LocalName] = f.local
	sum := 0
	for i, r := range paths {
		switch {
		case strings.TrimSpace(r.Name) == "":
			return nil, fmt.Errorf("fence: path %d has no name", i)
		case r.Name == LocalName:
			return nil, fmt.Errorf("fence: path name %q is the local reservation's", r.Name)
		case f.byName[r.Name] != nil:
			return nil, fmt.Errorf("fence: path %q reserved twice", r.Name)
		case r.Permits < 1:
			return nil, fmt.Errorf("fence: path %q: %d permits, want at least 1", r.Name, r.Permits)
		}
		sum += r.Permits
		p := &Path{f: f, name: r.Name, index: i}
		p.limit.Store(int64(r.Permits))
		f.paths = append(f.paths, p)
		f.byName[r.Name] = p
	}
	if sum > size {
		return nil, fmt.Errorf("fence: reservations of %d permits in all exceed the pool of %d workers", sum, size)
	}
	f.local.limit.Store(int64(size - sum))
	f.fallback = f.local
	if c.fallback != "" {
		p, ok := f.byName[c.fallback]
		if !ok {
			return nil, fmt.Errorf("fence: fallback reservation %q is not one of the fence's", c.fallback)
		}
		f.fallback = p
	}
	return f, nil
}

// Size returns the number of workers of the pool.
func (f *Fence) Size() int { return int(f.size) }

// Local returns the local reservation.
func (f *Fence) Local() *Path { return f.local }

// Paths returns the downstream paths' reservations, in the order they
// were configured.
func (f *Fence) Paths() []*Path { return append([]*Path(nil), f.paths...) }

// Path returns the reservation named name: a downstream path's, or the
// local one for "" and [LocalName]. A name the fence does not know gets
// the fallback reservation ([WithFallback]) and is counted.
func (f *Fence) Path(name string) *Path {
	if name == "" {
		return f.local
	}
	if p, ok := f.byName[name]; ok {
		return p
	}
	f.unknown.Add(1)
	return f.fallback
}

// Lookup returns the reservation named name, and false (counting
// nothing) if the fence has none of that name.
func (f *Fence) Lookup(name string) (*Path, bool) {
	if name == "" {
		return f.local, true
	}
	p, ok := f.byName[name]
	return p, ok
}

// Name returns the reservation's name.
func (p *Path) Name() string { return p.name }

// IsLocal reports whether p is the local reservation.
func (p *Path) IsLocal() bool { return p.index < 0 }

// Permits returns the permits reserved for the path now.
func (p *Path) Permits() int { return int(p.limit.Load()) }

// InUse returns the reservation's permits held now, including those lent
// to local requests.
func (p *Path) InUse() int { return int(p.used.Load()) }

// Running returns the path's requests running now, on whichever
// reservation's permit.
func (p *Path) Running() int { return int(p.runningNow()) }

// runningNow is used minus lent for a path; for the local reservation,
// used plus what the paths lend it.
func (p *Path) runningNow() int64 {
	if p.index >= 0 {
		return p.used.Load() - p.lent.Load()
	}
	n := p.used.Load()
	for _, q := range p.f.paths {
		n += q.lent.Load()
	}
	return n
}

// Waiting returns the path's requests waiting now.
func (p *Path) Waiting() int { return int(p.nwait.Load()) }

// Completed returns the number of the path's requests that released
// their permit since the fence was made.
func (p *Path) Completed() int64 { return p.completed.Load() }

// tryTake takes one of p's permits if one is free.
func (p *Path) tryTake() bool {
	for {
		u := p.used.Load()
		if u >= p.limit.Load() {
			return false
		}
		if p.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

// borrow takes a free permit of the path with the fewest permits in use,
// for a local request, and returns that path, or nil if none is free. A
// path whose own requests wait is passed over unless handoff is set: a
// local request arriving does not jump the path's line, but a permit that
// comes free goes to a waiting local request first (see grantLocked).
func (f *Fence) borrow(handoff bool) *Path {
	for {
		var best *Path
		var bestUsed int64
		for _, q := range f.paths {
			if !handoff && q.nwait.Load() > 0 {
				continue
			}
			u := q.used.Load()
			if u < q.limit.Load() && (best == nil || u < bestUsed) {
				best, bestUsed = q, u
			}
		}
		if best == nil {
			return nil
		}
		if best.tryTake() {
			return best
		}
	}
}

// take takes a permit for a request of p without waiting: its own
// reservation's, or for a local request a borrowed one (handoff: see
// borrow). It returns the reservation the permit belongs to, or nil.
func (f *Fence) take(p *Path, handoff bool) *Path {
	if p.tryTake() {
		return p
	}
	if p == f.local {
		return f.borrow(handoff)
	}
	return nil
}

// Permit is the right to one worker of a Fence, returned by
// [Fence.Acquire]. Release gives it back. It is a small value; copying it
// does not copy the right, so release each permit once.
type Permit struct {
	by, from *Path           // the request's path; the reservation the permit belongs to
	ctx      context.Context // only with WithResource: the task to charge
}

// Path returns the reservation of the request the permit was acquired
// for (nil for a zero Permit).
func (pm Permit) Path() *Path { return pm.by }

// Borrowed reports whether the permit is a path's, lent to a local
// request.
func (pm Permit) Borrowed() bool { return pm.by != nil && pm.by != pm.from }

// Acquire waits for a worker for a request of path p (nil: the local
// reservation) and returns a Permit to release when the request is done.
// It returns at once with a permit if one is free; with [ErrRejected] if
// the path's line is full; and with context.Cause(ctx) if ctx is done
// before a permit comes free, in which case nothing is held.
func (f *Fence) Acquire(ctx context.Context, p *Path) (Permit, error) {
	if p == nil {
		p = f.local
	} else if p.f != f {
		return Permit{}, fmt.Errorf("fence: path %q belongs to another fence", p.name)
	}
	// Fast path: nobody of p waits (nor, for a path, any local request,
	// which comes first) and a permit is free.
	if p.nwait.Load() == 0 && (p == f.local || f.local.nwait.Load() == 0) {
		if from := f.take(p, false); from != nil {
			return f.granted(ctx, p, from), nil
		}
	}
	return f.acquireSlow(ctx, p)
}

func (f *Fence) granted(ctx context.Context, p, from *Path) Permit {
	if from != p {
		from.lent.Add(1)
		from.borrowed.Add(1)
	}
	pm := Permit{by: p, from: from}
	if f.res != nil {
		_ = f.res.Acquire(ctx, 1)
		pm.ctx = ctx
	}
	return pm
}

func (f *Fence) acquireSlow(ctx context.Context, p *Path) (Permit, error) {
	if err := context.Cause(ctx); err != nil {
		return Permit{}, err
	}
	f.mu.Lock()
	p.nwait.Add(1)
	// With the count raised, a release either sees it or left a permit
	// this take finds.
	if p.q.Front() == nil && (p == f.local || f.local.q.Front() == nil) {
		if from := f.take(p, false); from != nil {
			p.nwait.Add(-1)
			f.mu.Unlock()
			return f.granted(ctx, p, from), nil
		}
	}
	if f.backlog > 0 && int64(p.q.Len()) >= f.backlog {
		p.nwait.Add(-1)
		f.mu.Unlock()
		p.rejected.Add(1)
		return Permit{}, fmt.Errorf("%w: path %q has %d waiting", ErrRejected, p.name, f.backlog)
	}
	w := &waiter{ch: make(chan *Path, 1)}
	p.q.PushBack(w)
	f.mu.Unlock()
	p.waited.Add(1)
	if f.res != nil {
		f.res.WaitBegin(ctx)
		defer f.res.WaitEnd(ctx)
	}
	select {
	case from := <-w.ch:
		return f.granted(ctx, p, from), nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.Queued() {
		p.q.Remove(w)
		p.nwait.Add(-1)
		f.mu.Unlock()
		return Permit{}, context.Cause(ctx)
	}
	f.mu.Unlock()
	// Granted as ctx ended: give the permit back to whoever waits next.
	f.put(<-w.ch)
	return Permit{}, context.Cause(ctx)
}

// Release gives the permit back: to a waiting local request first, then
// to a waiter of the reservation it belongs to. Releasing a zero Permit,
// or a permit twice while its reservation holds no other, returns an
// error, counts the mistake and changes nothing.
func (pm Permit) Release() error {
	if pm.by == nil {
		return ErrZeroPermit
	}
	f := pm.from.f
	if pm.from != pm.by {
		if !decrement(&pm.from.lent) {
			f.misuse.Add(1)
			return fmt.Errorf("fence: release of a permit %q lends, which lends none", pm.from.name)
		}
	}
	if !f.put(pm.from) {
		f.misuse.Add(1)
		return fmt.Errorf("fence: release of a permit of %q, which holds none", pm.from.name)
	}
	pm.by.completed.Add(1)
	if f.res != nil && pm.ctx != nil {
		_ = f.res.Release(pm.ctx, 1)
	}
	return nil
}

// put returns one permit of reservation from and wakes the waiters it
// lets through. It returns false, changing nothing, if from holds no
// permit.
func (f *Fence) put(from *Path) bool {
	if !decrement(&from.used) {
		return false
	}
	if f.local.nwait.Load() > 0 || from.nwait.Load() > 0 {
		f.mu.Lock()
		f.grantLocked()
		f.mu.Unlock()
	}
	return true
}

// decrement takes one from n unless n is below 1.
func decrement(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v < 1 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// grantLocked hands free permits to waiters: local requests first, on the
// local reservation or borrowed, then each path's own waiters in order.
func (f *Fence) grantLocked() {
	for w := f.local.q.Front(); w != nil; w = f.local.q.Front() {
		from := f.take(f.local, true)
		if from == nil {
			break
		}
		f.local.q.Remove(w)
		f.local.nwait.Add(-1)
		w.ch <- from
	}
	for _, p := range f.paths {
		for w := p.q.Front(); w != nil; w = p.q.Front() {
			if !p.tryTake() {
				break
			}
			p.q.Remove(w)
			p.nwait.Add(-1)
			w.ch <- p
		}
	}
}

// Resize sets the permits reserved for the path named name; the local
// reservation gets what the paths leave of the pool. Waiters that now fit
// are let through; permits held above a smaller reservation stay held
// until released. It refuses permits below 1, an unknown or local name,
// and a size that would take the paths' reservations above the pool.
func (f *Fence) Resize(name string, permits int) error {
	p, ok := f.byName[name]
	if !ok || p == f.local {
		return fmt.Errorf("fence: no path reservation %q to resize", name)
	}
	if permits < 1 {
		return fmt.Errorf("fence: path %q: %d permits, want at least 1", name, permits)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sum := int64(permits)
	for _, q := range f.paths {
		if q != p {
			sum += q.limit.Load()
		}
	}
	if sum > f.size {
		return fmt.Errorf("fence: path %q at %d permits would take the reservations to %d, above the pool of %d workers", name, permits, sum, f.size)
	}
	p.limit.Store(int64(permits))
	f.local.limit.Store(f.size - sum)
	f.grantLocked()
	return nil
}

// Stats is a snapshot of a fence's counters.
type Stats struct {
	Size    int
	Paths   []PathStats // the local reservation first
	Unknown int64       // lookups of names the fence does not know
	Misuse  int64       // releases of permits not held
}

// PathStats are one reservation's counters.
type PathStats struct {
	Name      string
	Permits   int   // reserved now
	InUse     int   // the reservation's permits held, lent ones included
	Running   int   // the path's requests running
	Waiting   int   // the path's requests waiting
	Completed int64 // the path's requests done
	Waited    int64 // the path's requests that had to wait
	Rejected  int64 // the path's requests refused: line full
	Lent      int64 // local requests that ran on this reservation's permits
}

// Stats returns the fence's counters now.
func (f *Fence) Stats() Stats {
	s := Stats{Size: int(f.size), Unknown: f.unknown.Load(), Misuse: f.misuse.Load()}
	for _, p := range append([]*Path{f.local}, f.paths...) {
		s.Paths = append(s.Paths, PathStats{
			Name: p.name, Permits: int(p.limit.Load()), InUse: int(p.used.Load()),
			Running: int(p.runningNow()), Waiting: int(p.nwait.Load()),
			Completed: p.completed.Load(), Waited: p.waited.Load(), Rejected: p.rejected.Load(),
			Lent: p.borrowed.Load(),
		})
	}
	return s
}

// waiter is a request waiting for a permit. Its channel has room for the
// grant, so granting never blocks; the grant names the reservation the
// permit belongs to.
type waiter struct {
	ch chan *Path
	waitq.Links[waiter]
}

func (w *waiter) WaitLinks() *waitq.Links[waiter] { return &w.Links }

// waitQueue is a path's FIFO of waiters.
type waitQueue = waitq.Queue[waiter, *waiter]

// Package moiraietcd is what etcd's patched source calls: the in-memory
// index lock of etcd's mvcc store as a moirai reader/writer lock.
//
// etcd's mvcc store keeps one B-tree index of every key (treeIndex) under
// one sync.RWMutex. A range walks the index under the read lock, a count
// or a range over many keys for as long as the walk lasts, while every
// write of the apply loop takes the write lock: one long walk stops every
// write, and, since a waiting writer holds back the readers that arrive
// after it, every small read too. integrations/etcd/etcd.patch makes that
// lock an [IndexLock], gives the walks the request's context, and stops a
// walk whose context is done.
//
// # Who is charged
//
// The gRPC interceptors (package grpcmw) make each request a task. A range
// locks the index with its request's context ([IndexLock.RLockCtx]): its
// hold is charged to its task, and a wait behind a writer is its own. The
// apply loop has no request: its writes ([IndexLock.Lock]) are charged to
// one long-lived background task, "etcd/apply", not cancellable, so that
// the controller sees the loop wait behind a walk and blames the walk.
// The index's other readers (the apply loop's lookups before a write,
// compaction) lock without a task and are counted as untracked.
//
// A put does not touch the index itself: it waits while the apply loop
// applies it. So the apply loop's task holds a second resource, "etcd/apply",
// for as long as it is installed, and each request waiting for its
// proposal to be applied waits for it ([WaitApply]). A walk that keeps
// the apply loop waiting is then the root of the puts' waits: the
// controller charges them to the walk, and never to the loop, which is
// not cancellable (while the loop waits for nobody, overload on it has no
// culprit to cancel).
//
// # Requests
//
// [UnaryServerInterceptor] makes each call a task (grpcmw's interceptor)
// whose class, for a Range, says the request's shape, so that moirai
// learns what a large range costs apart from the point reads; and it
// answers a cancelled call as etcd answers the calls it sheds. etcd's
// embed.Config takes it as is (GRPCAdditionalServerOptions): no patch
// line makes requests tasks.
//
// [Install] sets the controller before etcd starts; without it an
// [IndexLock] is a plain sync.RWMutex and the patched server behaves as
// the released one. [InstallOracle] is for measuring only: instead of a
// controller, an oracle that knows the culprits cancels their walks the
// moment a write waits, the bound of any controller acting on evidence.
package moiraietcd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/resource"
)

// The resources' names.
const (
	// ResourceName is the index lock's.
	ResourceName = "etcd/mvcc-index"
	// ApplyName is the apply loop's: held by the apply loop's task as long
	// as it is installed, waited for by every request that waits for its
	// proposal to be applied.
	ApplyName = "etcd/apply"
)

type installed struct {
	apply context.Context
	loop  *moirai.Resource
	index *moirai.Resource
}

var (
	cur     atomic.Pointer[installed]
	orc     atomic.Pointer[oracle]
	created atomic.Int64
)

// Install makes the index locks created from now on moirai locks of ctl,
// and begins the apply loop's task, holding the apply loop's resource. It
// returns the function that ends that task; call it once the server has
// stopped, before ctl.Close. Install is not meant to be called while a
// server runs. It fails if ctl already has a resource of one of its
// names (a second Install on one controller), and changes nothing
// then. One controller is installed per process: a second Install
// replaces the first for the locks created after it.
func Install(ctl *moirai.Controller) (uninstall func(), err error) {
	loop, err := ctl.Register(ApplyName, moirai.KindLock, 0)
	if err != nil {
		return nil, err
	}
	index, err := ctl.Register(ResourceName, moirai.KindLock, 0)
	if err != nil {
		return nil, err
	}
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "etcd/apply", Kind: moirai.Background})
	if err := loop.Acquire(ctx, 1); err != nil {
		t.End(err)
		return nil, err
	}
	cur.Store(&installed{apply: ctx, loop: loop, index: index})
	return func() {
		cur.Store(nil)
		_ = loop.Release(ctx, 1)
		t.End(nil)
	}, nil
}

// WaitApply records that the request in ctx begins to wait for the apply
// loop to apply its proposal; [ApplyWait.End] records that the wait is
// over. With no controller installed, both do nothing.
func WaitApply(ctx context.Context) ApplyWait {
	in := cur.Load()
	if in == nil {
		return ApplyWait{}
	}
	in.loop.WaitBegin(ctx)
	return ApplyWait{ctx: ctx, loop: in.loop}
}

// ApplyWait is a request's wait for the apply loop.
type ApplyWait struct {
	ctx  context.Context
	loop *moirai.Resource
}

// End ends the wait.
func (w ApplyWait) End() {
	if w.loop != nil {
		w.loop.WaitEnd(w.ctx)
	}
}

// Created returns how many index locks the patched source has created: a
// server built without the patch creates none.
func Created() int64 { return created.Load() }

// IndexLock is the mvcc index's lock. Its zero value is not usable; make
// one with [NewIndexLock]. It has sync.RWMutex's method set, so that the
// index's code that takes no context is unchanged, plus [IndexLock.RLockCtx]
// for the walks that have one.
type IndexLock struct {
	plain *sync.RWMutex
	m     *moirai.RWMutex
	apply context.Context
	o     *oracle // set by InstallOracle, beside a plain lock
}

// NewIndexLock returns an unlocked index lock: a moirai lock of the
// installed controller (every index's lock is accounted to the one
// resource [ResourceName]), or a plain one if none is installed.
func NewIndexLock() IndexLock {
	created.Add(1)
	in := cur.Load()
	if in == nil {
		return IndexLock{plain: new(sync.RWMutex), o: orc.Load()}
	}
	return IndexLock{m: resource.NewRWMutex(in.index), apply: in.apply}
}

// Lock locks for writing, charged to the apply loop's task. The apply
// task is not cancellable, so Lock cannot fail.
func (l IndexLock) Lock() {
	if l.m == nil {
		if l.o == nil {
			l.plain.Lock()
		} else if !l.plain.TryLock() {
			l.o.writerWaits()
			l.plain.Lock()
		}
		return
	}
	_ = l.m.Lock(l.apply)
}

// Unlock undoes Lock.
func (l IndexLock) Unlock() {
	if l.m == nil {
		l.plain.Unlock()
		return
	}
	l.m.Unlock()
}

// RLock locks for reading without a task.
func (l IndexLock) RLock() {
	if l.m == nil {
		l.plain.RLock()
		return
	}
	_ = l.m.RLock(context.Background())
}

// RUnlock undoes RLock.
func (l IndexLock) RUnlock() {
	if l.m == nil {
		l.plain.RUnlock()
		return
	}
	l.m.RUnlock(context.Background())
}

// RLockCtx locks for reading, charged to the task in ctx, and returns the
// hold to release with [ReadHold.RUnlock]. It always locks: if the lock
// refuses the task (the controller cancelled it, or ctx ended while it
// waited), it locks for no task instead, so that the caller may look at
// the index, and [Visit] stops the caller's walk at its first key.
func (l IndexLock) RLockCtx(ctx context.Context) ReadHold {
	if l.m == nil {
		l.plain.RLock()
		if l.o != nil {
			return ReadHold{l: l, call: l.o.hold(ctx)}
		}
		return ReadHold{l: l}
	}
	if l.m.RLock(ctx) != nil {
		ctx = context.Background()
		_ = l.m.RLock(ctx)
	}
	return ReadHold{l: l, ctx: ctx}
}

// ReadHold is a read lock taken by [IndexLock.RLockCtx].
type ReadHold struct {
	l    IndexLock
	ctx  context.Context
	call *culpritCall // the oracle's, if a culprit holds it
}

// RUnlock releases the read lock, charged to the task that took it.
func (h ReadHold) RUnlock() {
	if h.l.m == nil {
		if h.l.o != nil {
			h.l.o.release(h.call)
		}
		h.l.plain.RUnlock()
		return
	}
	h.l.m.RUnlock(h.ctx)
}

// visitEvery is how many keys a walk visits between two looks at its
// context: about 10 µs of walking, so that a cancelled walk stops within
// a few microseconds and a walk that nobody cancels pays one context check
// per 256 keys.
const visitEvery = 256

// Visit is told of the n-th key (from 1) a walk of the index visits, and
// of the index's size. At the first key and every [visitEvery] keys after
// it reports the walk's progress to the task in ctx, if any (n of size:
// size bounds the keys a walk can visit), and reports whether the walk
// may go on: false once ctx is done.
func Visit(ctx context.Context, n int64, size int) bool {
	if n%visitEvery != 1 {
		return true
	}
	return visit(ctx, n, size)
}

func visit(ctx context.Context, n int64, size int) bool {
	if t := moirai.From(ctx); t != nil {
		t.Progress(n, int64(size))
	}
	return ctx.Err() == nil
}

// UnaryServerInterceptor is grpcmw's unary server interceptor for ctl,
// with three things of etcd's own:
//
//   - Only the calls that walk the index are cancellable: Range calls
//     over a range of keys. Cancelling a write after its proposal frees
//     nothing (the apply loop applies it all the same) and leaves the
//     client unsure whether it was applied; a point read does one lookup.
//     opts may say otherwise (grpcmw.WithCancellable).
//   - A Range call's class is its method and its request's shape: "key"
//     (no range end), "range", "keys-only" or "count-only". A class is
//     the kind of work whose typical length moirai learns; a range over a
//     key space is not the work of a point read, and a class cancelled as
//     a culprit is known to be heavy the next time it comes.
//   - A call the controller cancelled is answered as etcd answers the
//     requests it sheds itself: codes.ResourceExhausted ("etcdserver: too
//     many requests" is one). grpcmw answers codes.Unavailable, which
//     clientv3 retries at once, up to 100 times, for every read: the
//     cancelled range would be sent again 25 ms later.
func UnaryServerInterceptor(ctl *moirai.Controller, opts ...grpcmw.Option) grpc.UnaryServerInterceptor {
	in := grpcmw.UnaryServerInterceptor(ctl, append([]grpcmw.Option{grpcmw.WithCancellable(false)}, opts...)...)
	var shaped [len(rangeShapes)]grpc.UnaryServerInterceptor
	for i, shape := range rangeShapes {
		// Nested in the first, for the same controller: it refines the
		// call's task rather than beginning another.
		shaped[i] = grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithClass(func(m string) string { return m + " " + shape }),
			grpcmw.WithCancellable(i != shapeKey))
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var tctx context.Context // the call's task's context
		resp, err := in(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			tctx = ctx
			if r, ok := req.(*pb.RangeRequest); ok {
				return shaped[shapeOf(r)](ctx, req, info, handler)
			}
			return handler(ctx, req)
		})
		if err != nil && tctx != nil && status.Code(err) == codes.Unavailable && errors.Is(context.Cause(tctx), moirai.ErrCancelled) {
			return resp, status.Error(codes.ResourceExhausted, "etcdserver: request cancelled: server overloaded")
		}
		return resp, err
	}
}

// rangeShapes name the shapes of a Range request, as shapeOf numbers them.
var rangeShapes = [...]string{shapeKey: "key", "range", "keys-only", "count-only"}

// shapeKey is a point read's shape.
const shapeKey = 0

func shapeOf(r *pb.RangeRequest) int {
	switch {
	case len(r.RangeEnd) == 0:
		return shapeKey
	case r.CountOnly:
		return 3
	case r.KeysOnly:
		return 2
	}
	return 1
}

// Package fence splits a service's worker pool into reservations, one per
// downstream path plus a local one, so that a slow downstream holds at
// most its own path's workers and every other path keeps serving
// (PathFence, HPDC'25, §3–§4).
//
// # The problem
//
// A shared service whose handlers call downstreams holds a worker for as
// long as the downstream call lasts. When one downstream stalls for a few
// hundred milliseconds (a millibottleneck: a garbage collection, a log
// flush, a noisy neighbour), the requests on its path pile up on the
// shared pool until they hold every worker; requests on other paths, and
// requests that call nothing, then wait or time out although their own
// downstreams are idle. A per-service concurrency limit does not help: it
// limits everyone.
//
// # Fences
//
// A [Fence] of N workers holds a reservation per downstream path, each of
// a number of permits, and a local reservation of the workers left. A
// request of a path runs only on its path's permits: requests stuck on a
// stalled downstream wait in their path's own line while the others run.
// Local requests (those that call nothing, usually short) run on the local
// reservation and, when it is full, borrow a free permit from the path
// with the fewest permits in use; a permit that comes free goes to a
// waiting local request before its own path's waiters. So the pool is
// never idle while local work waits, and a path never loses its permits
// for longer than a local request runs.
//
//	f, err := fence.New(32, []fence.Reservation{{Name: "d1", Permits: 8}, {Name: "d2", Permits: 8}},
//		fence.WithBacklog(64))
//	d1 := f.Path("d1")                 // resolve once; Acquire then does no lookup
//	permit, err := f.Acquire(ctx, d1)  // waits in d1's line; context-aware
//	if err != nil { ... }              // ErrRejected: d1's line is full
//	defer permit.Release()
//
// Reservations resize at run time ([Fence.Resize]) without dropping a
// permit: waiters that now fit go through, permits held above a smaller
// reservation stay held until released. A name the fence does not know
// gets a fallback reservation (the local one unless [WithFallback] says
// otherwise) and is counted in [Stats].Unknown.
//
// # Which path
//
// A request's path is the downstream it calls. The middleware learns it:
// the server interceptors (grpcmw.WithFence, httpmw.WithFence) ask a
// [Classifier] for the path of the request's kind (its method or route)
// and record the kind in the request's context ([WithCaller]); the client
// interceptors report each downstream call and its duration
// ([ObserveCall]); a kind's path is the downstream it has spent the most
// time calling, and a kind seen calling nothing is local. An application
// can also choose a request's path itself (the middleware's WithPathOf).
//
// # Tuning: the SCT model
//
// The permits a path needs are the smallest concurrency at which its
// downstream reaches its peak throughput, Q_lower: fewer starve the path,
// more only queue in the downstream while holding this service's workers.
// A [Tuner] samples each path's concurrency and throughput every 50 ms and
// sets its permits from the [SCT] estimator over a sliding window (see
// [SCT] for the estimator and why it is built so).
//
// # Costs and locking
//
// Acquire and Release cost a compare-and-swap each and a few atomic loads
// while a permit is free and nobody waits; waiting takes the fence's one
// mutex, which also serializes resizing. The tuner holds its own mutex
// and takes the fence's under it (lock order: Tuner, then Fence); neither
// is held while user code runs.
package fence

// Package httpmw is moirai's net/http server middleware: it makes every
// request a moirai task, so that the controller sees who holds and who
// waits for what, and can cancel the request that monopolizes a resource
// through the request's own context.
//
// # What the middleware does
//
// [Handler] begins a task per request (class, key and cancellability from
// its options), passes the task's context to the next handler as the
// request's context, and ends the task when the handler returns: with an
// error for a 5xx answer or a panic, so that the controller's completion
// counts and latency histograms see failures. Cancellation propagates the
// standard way: the controller cancels the request's context with cause
// moirai.ErrCancelled, so every call the handler makes with that context
// (a database query, an outgoing request, a moirai lock) returns. A handler
// that returns after a cancellation without answering gets a 503 whose
// Retry-After is its class's expected wait (moirai.Controller.ExpectedWait,
// at least a second) and whose body says only that the server is
// overloaded, unless [WithExposedCause] adds the reason; the reason stays
// in the context's cause either way.
//
// # Objectives and background work
//
// The controller's objective (moirai.WithSLO) is every request's by
// default. [WithObjective] gives the requests of some classes, or all the
// Handler serves, an objective of their own, or none
// (moirai.NoObjective): the detector counts a request late past its own
// objective, and never counts one of no objective. [WithBackground] marks
// classes as background work (moirai.Background): never counted late, and,
// when cancellable, cancelled before any foreground request that would
// free the contended resource.
//
// # Nesting
//
// One request is one task, however many Handlers of one controller it
// goes through. An inner Handler (typically one per route, under an outer
// one on the mux, as in the usage below) finds the outer task in the
// request's context and refines it with its own options rather than
// beginning a task: the class when it has [WithClass] or wraps a
// ServeMux that routes the request (its route is where the request ends
// up, however the outer layers mounted it), the key with
// [WithKey], the cancellability with [WithCancellable], and the objective
// and kind its [WithObjective] and [WithBackground] give the resulting
// class; what it does not set stays the outer Handler's. Its admission and
// fence, when it has them, run as they would alone. An inner Handler with
// [WithReexecution] re-executes the request: the outer task is the first
// run, a re-execution a task of its own begun from the context the outer
// task was begun from (with the values the layers in between added); the
// outer Handler ends its task when the request is answered. When the
// outer Handler re-executes too, it alone does: the work runs at most
// twice.
//
// # Re-execution
//
// With [WithReexecution], a request that the controller cancels is not
// lost: it is re-executed once, as a task that is not cancellable, when its
// class's demand fits what the resources it used have spare, its class
// capped meanwhile (see moirai.Retry, which does the waiting and the
// deciding). Its effects stay exactly-once by default:
//
//   - Only requests safe to run twice are re-executed: the idempotent
//     methods of RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE); a
//     route of another method only when it opts in ([WithReexecutable],
//     for a handler whose work is one transaction) or when the request
//     carries an idempotency key the application honours
//     ([WithIdempotencyKey]). Any other request is served directly:
//     cancelled, it is answered 503 and runs once.
//   - A run that completed is never run again: a handler that answered
//     (any status below 500) keeps its answer, whatever happened to its
//     context afterwards. Only a run that gave up — returned without
//     answering, or answered 5xx, after its cancellation — is discarded.
//   - The client's wait is bounded: by the request's objective (its
//     route's [WithObjective], else the controller's), counted from the
//     first run's start, or by an explicit moirai.RetryMaxWait given to
//     WithReexecution. A request not re-executed within it is answered
//     503 with its class's expected wait (moirai.Controller.ExpectedWait)
//     as Retry-After.
//
// To make that possible the middleware buffers, for those requests only,
// the request body (up to [WithMaxBody]; a larger body turns
// re-execution off for that request) and the whole response of each run,
// which is discarded if the run gave up. Buffering means such a handler
// cannot stream: Flush is a no-op until the handler returns, and
// http.ResponseController cannot reach the connection.
//
// # One answer path
//
// Every response a Handler writes — the handler's own, a kept run's
// buffer, a rejection by admission or a fence, the 503 of a cancelled or
// dropped request — goes through one writer that applies the header
// rules once, as the header is sent: every Moirai-… header the handler
// set (a reverse proxy copies its downstream's) is removed, and the
// hop's own set (its admission level; its culprit answer, to a caller
// that sent the tree). A culprit answer a handler passes on is counted
// ([ForgedCulprits], moirai.Controller.TreeStats). A [Transport] likewise
// sends only its own Moirai-… request headers.
//
// # Admission and path fences
//
// [WithAdmission] runs DAGOR's admission by priority, and [Transport], the
// client side, sends priorities downstream and sheds by the levels
// downstreams return (see admission.go's options); once a request of a
// task is admitted, its later requests go out as continuations
// ([HeaderContinuation]), which a trusting server admits at its level from
// before a recent cut. [WithFence] runs every
// request on a permit of a fence.Fence, on the reservation of its path:
// the downstream (by host, unless [WithPathName] says otherwise) its
// class spends the most time calling through [Transport] with the
// request's context, as the fence's Classifier learns it; a class seen
// calling nothing is local. [WithPathOf] sets a request's path directly.
//
// # Request trees
//
// With [WithTree] on the handlers and [WithTreeCancel] on the
// [Transport], a request carries the identity of the request tree it
// serves (package github.com/moirai-go/moirai/tree), honoured from
// trusted peers only, and a request the controller cancels as a culprit
// is answered with a Moirai-Culprit header that makes the caller cancel
// its own task for the tree, hence its other downstream requests, up to
// the root. Forged answers are ignored and counted ([ForgedCulprits]).
// See docs/TREE.md.
//
// # Usage
//
//	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
//	defer ctl.Close()
//	mux := http.NewServeMux()
//	mux.Handle("POST /report", httpmw.Handler(ctl, reportHandler, // refines the outer task
//		httpmw.WithClass(func(*http.Request) string { return "report" }),
//		httpmw.WithBackground(), // nobody waits on a report against 50 ms
//		httpmw.WithReexecution()))
//	http.ListenAndServe(addr, httpmw.Handler(ctl, mux)) // one task per request
package httpmw

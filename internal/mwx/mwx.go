// Package mwx is what moirai's middleware (httpmw, grpcmw) shares, and the
// door through which it reaches the controller's plumbing that
// applications never call: the re-execution of a request whose first run
// is the task an outer layer of middleware began (RetryOn) and the
// request trees' trust counters (IgnoredCulprit, NoTrustedPeer), which
// package moirai fills in its init function; the per-class settings both
// middlewares keep (Routes, ClassSet); and their clock for expiries
// (Monotonic). It imports only package task, so that moirai can import it.
package mwx

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/task"
)

// RetryOn is moirai.Retry whose first run is t, a live task of ctl (a
// *moirai.Controller) that an outer layer began and that the caller has
// refined to the inner layer's spec: fn runs on t's context; when the
// controller cancels t, fn is re-executed, as Retry does, as a new task
// begun from the context t was begun from. RetryOn neither begins nor
// ends t. opts are moirai.RetryOption values.
var RetryOn func(ctl any, t *task.Task, fn func(context.Context) error, opts []any) error

// IgnoredCulprit counts, on ctl (a *moirai.Controller), a culprit answer
// its middleware ignored: from a downstream not trusted, malformed,
// naming another tree, or passed on by a handler as its own. Package
// moirai fills it in.
var IgnoredCulprit func(ctl any)

// NoTrustedPeer records on ctl that one of its middlewares enables
// request trees without trusting any peer, and logs what follows (why) as
// a warning, once per middleware. Package moirai fills it in.
var NoTrustedPeer func(ctl any, why string)

// epoch is the origin of Monotonic.
var epoch = time.Now()

// Monotonic is the middleware's clock for expiries of its own (the
// levels a client caches): the monotonic time since the process loaded
// the package, immune to steps of the wall clock.
func Monotonic() time.Duration { return time.Since(epoch) }

// Package mwx is what moirai's middleware (httpmw, grpcmw) shares, and the
// door through which it reaches the controller's plumbing that
// applications never call: the re-execution of a request whose first run
// is the task an outer layer of middleware began (RetryOn) and the
// request trees' trust counters (IgnoredCulprit, NoTrustedPeer), which
// package moirai fills in its init function. What the two protocols
// share: the settings that mean the same in both, with their defaults,
// their setters and the way options are applied (Server, Client, Apply;
// each package's options forward to them); the per-class settings
// (Routes, ClassSet); admission (Admit, Lowest) and the names of the
// cooperation between services (PriorityName, LevelName,
// ContinuationName); a client's cache of its downstreams' levels
// (Levels); the report of a downstream call to a fence (CallStart,
// CallEnd, StreamStart); and their one clock for the durations and
// expiries of their own (Monotonic). It imports no package that imports
// moirai (task, admit, fence), so that moirai can import it.
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

// Monotonic is the middleware's one clock for the expiries and durations
// of its own (the levels a client caches, the downstream calls a fence
// learns from), in httpmw and grpcmw alike: the monotonic time since the
// process loaded the package, immune to steps of the wall clock. (The
// tasks' times are the controller's clock's.)
func Monotonic() time.Duration { return time.Since(epoch) }

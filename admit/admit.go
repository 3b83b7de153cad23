package admit

import "time"

// An Admitter decides at a request's arrival whether it may enter, and
// learns from what happened to the requests it admitted. Implementations
// are safe for concurrent use. [DAGOR] is the library's; the lab's
// baselines (CoDel, Breakwater, random shedding, in
// github.com/moirai-go/moirai/bench/baseline) implement it too, so that the
// middleware runs them in its place.
type Admitter interface {
	Name() string
	// Admit reports whether a request arriving at now (monotonic time since
	// an arbitrary epoch, as time.Duration) may enter. It must be cheap: a few
	// atomic loads and compares on the fast path, no allocation.
	Admit(now time.Duration) bool
	// Started reports that an admitted request left the queue and began
	// being served at now after waiting queueDelay. It returns false if the
	// request must be dropped now instead (CoDel drops at dequeue time); the
	// caller then rejects it.
	Started(now, queueDelay time.Duration) bool
	// Done reports that an admitted, started request finished at now after
	// being served for service.
	Done(now, service time.Duration)
}

var _ Admitter = (*DAGOR)(nil)

// Package admit holds admission controllers that act on a server's request
// queue: they decide at a request's arrival whether it may enter, or at the
// moment it leaves the queue whether it may still be served, from the
// queueing delay the server observes.
//
// The package provides the baselines a user would otherwise reach for, each
// faithful to its source, behind one small interface, [Admitter]:
//
//   - [CoDel]: Controlled Delay (Nichols and Jacobson, "Controlling Queue
//     Delay", ACM Queue 10(5), 2012; RFC 8289) applied to requests instead of
//     packets. It drops at dequeue time.
//
//   - [Breakwater]: the server side of Breakwater (Cho, Saeed, Fried, Park,
//     Alizadeh and Belay, "Overload Control for µs-scale RPCs with
//     Breakwater", OSDI 2020): a credit pool sized by AIMD on the queueing
//     delay. It refuses at arrival.
//
//   - [DAGOR]: priority-based admission from WeChat (Zhou et al., "Overload
//     Control for Scaling WeChat Microservices", SoCC 2018, §4), moirai's
//     own mechanism. Overload is an average queueing time above 20 ms in a
//     window of 1 s or 2,000 started requests, whichever ends first. The
//     admission level is a compound (business, user) priority; after each
//     window Algorithm 1 moves it along the histogram of the priorities
//     of the tasks that arrived (first calls; continuations, later calls
//     of admitted tasks, only teach it how many calls a task brings):
//     after an overloaded window to (1−α) of what the server started
//     (α = 5 %, in proportion to the overload below twice the threshold),
//     otherwise up by β = 1 % and back to the capacity it measured,
//     holding while the queue builds. The level is fractional within a
//     business priority, read from per-level arrival rates averaged over
//     windows (the keyed user hash spreads users uniformly), so it can
//     move by less than one user level. Where and why this
//     departs from the paper's rule is on the unexported levelCtl and in
//     docs/ADMISSION.md ("Design"). [DAGOR.AdmitPriority] is one atomic
//     load, a compare and one atomic add: a few nanoseconds and no
//     allocation (BenchmarkAdmitPriority; docs/ADMISSION.md has the
//     numbers).
//     The level is what servers return on every response ([FormatLevel],
//     [ParseLevel]; malformed values are refused and counted in
//     [Malformed]). Entry services assign priorities: business priority
//     from an [Actions] table (unlisted actions are the least important),
//     user priority from a [UserHasher], a keyed hash over 128 levels
//     re-keyed every hour.
//
//   - [Random]: DAGOR's random-shedding baseline: the same detection, an
//     admitted fraction instead of a level.
//
//   - [SRE]: client-side adaptive throttling (Google SRE book, K = 2); a
//     client-side mechanism with Allow/Record instead of the Admitter
//     interface.
//
// # How a server drives an Admitter
//
// The server reports each request's life in three calls, with times taken
// from one monotonic clock (a time.Duration since an arbitrary epoch):
//
//	if !a.Admit(now) {           // at arrival
//		reject(req)              // 503 + Retry-After, ResourceExhausted
//		return
//	}
//	// ... the request waits in the server's queue ...
//	if !a.Started(now, now-req.arrived) { // a worker takes it
//		reject(req)              // dropped at dequeue (CoDel)
//		return
//	}
//	serve(req)
//	a.Done(now, now-req.started) // it finished (also after an error)
//
// Every request Admit admits must eventually be reported to Started, and every
// request Started lets through to Done; a request abandoned while queued
// (its client gave up) should still be reported to Started with the delay it
// waited, and to Done with a zero service time if Started let it through.
// Admitters never read the wall clock, start no goroutine and arm no timer:
// their behaviour is a deterministic function of the sequence of calls,
// which is what the tests in this package script.
//
// # CoDel
//
// CoDel watches the sojourn time (the queueDelay passed to Started) of the
// requests leaving the queue. Once it has stayed at or above the target
// (default 5 ms) for at least one interval (default 100 ms), CoDel enters
// its dropping state and drops the request being dequeued; while dropping, it
// drops the next requests at times spaced interval/√count after each other
// (RFC 8289's control law), so the drop rate rises until the delay falls
// below the target, at which point it leaves the dropping state. When it
// re-enters soon after leaving (within 16 intervals), it resumes from the
// drop rate it had reached rather than from one. As in the
// RFC, a request is never considered above target while at most one request
// (the "packet" of the RFC's bytes() <= MAXPACKET test) remains queued
// behind it; CoDel knows the backlog from the calls to Admit and Started.
//
// The translation from packets to requests is one Started call per dequeue:
// where the RFC's dequeue drops a packet and at once dequeues the next one in
// the same call, here the caller rejects the request and the next Started
// call plays the role of that next dequeue, with its own time.
//
// What CoDel does not do: it never refuses at arrival ([CoDel.Admit] always
// admits), it does not know the server's idle periods (the RFC leaves the
// dropping state when the queue is found empty; here the backlog rule above
// has that effect), and it uses no priorities. It is not the "adaptive LIFO"
// variant Facebook paired with CoDel for RPC servers.
//
// # Breakwater
//
// Breakwater's server keeps a pool of credits, each allowing one client
// request to be outstanding, and sizes it every control period (an RTT in
// the paper; default 10 ms here) from the largest queueing delay d observed
// in that period against a target delay t:
//
//	d < t:  credits += A                                  (additive increase)
//	d ≥ t:  credits *= max(1 − β·(d − t)/t, 1 − βmax)      (multiplicative decrease)
//
// with β = 0.1 and βmax = 0.5 by default: the decrease grows with how far
// the delay overshoots the target and at most halves the pool per period.
// The overshoot is divided by the target and the floor is 1 − βmax = 0.5 as
// in the authors' implementation (Caladan's breakwater/, srpc_cc_worker),
// whose β is 0.02 for a 10 µs RTT; with a control period a thousand times
// longer, the larger step converges in fewer periods. A, the
// additive increase, defaults to 5% of the current pool and at least one
// credit (the paper scales A with the number of clients; a server that does
// not know its clients scales it with the pool instead). The pool stays
// within [1, 10000] by default.
//
// The target is scaled to the service time, as the authors' recommended
// settings are (targets from 45 µs for 1 µs requests to 500 µs for 100 µs
// requests): by default t = max(1 ms, 2 × the mean service time), where the
// mean is an exponentially weighted moving average (weight 0.1 per control
// period, the EWMA weight of the authors' code) of the service times
// reported to Done.
// [WithBreakwaterTarget] changes the floor and the multiple; a multiple of
// zero fixes the target at the floor.
//
// In Breakwater clients hold the credits and send only while they hold one.
// Inside one server there are no clients to hand credits to, so
// [Breakwater.Admit] models the credits the clients would hold as the
// requests admitted and not yet done: it admits while that number is below
// the pool and refuses otherwise.
//
// What Breakwater does not do here: no credit distribution to clients, no
// demand speculation or overcommitment (the in-process pool is the
// clients' aggregate window), and no delay-based AQM at arrival (the paper's
// second line of defence; pair it with [CoDel] if you want one):
// [Breakwater.Started] always lets the request through. A control period in
// which no request started leaves the pool unchanged, since it gives no
// evidence either way; periods are measured from the calls, so a server that
// receives no calls for a while makes a single update on the next one.
//
// # Concurrency
//
// Both admitters are safe for concurrent use. Admit is a few atomic loads
// and compares and at most one atomic add or compare-and-swap (retried under
// contention); Breakwater's Started and Done are
// lock-free except once per control period, and CoDel's Started takes one
// mutex to run its state machine. None of them allocates.
package admit

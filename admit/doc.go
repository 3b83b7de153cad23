// Package admit is moirai's priority admission: DAGOR's priority-based
// admission control and the priorities it reads. It acts on a server's
// request queue: it decides at a request's arrival whether it may enter,
// from the queueing delay the server observes and the request's priority.
//
// [DAGOR] is priority-based admission from WeChat (Zhou et al., "Overload
// Control for Scaling WeChat Microservices", SoCC 2018, §4), moirai's
// own mechanism. Overload is an average queueing time above 20 ms in a
// window of 1 s or 2,000 started requests, whichever ends first. The
// admission level is a compound (business, user) priority; after each
// window Algorithm 1 moves it along the histogram of the priorities
// of the tasks that arrived (first calls; continuations, later calls
// of admitted tasks, only teach it how many calls a task brings):
// after an overloaded window to (1−α) of what the server started
// (α = 5 %, in proportion to the overload below twice the threshold),
// otherwise up by β = 1 % and back to the capacity it measured,
// holding while the queue builds. The level is fractional within a
// business priority, read from per-level arrival rates averaged over
// windows (the keyed user hash spreads users uniformly), so it can
// move by less than one user level. Where and why this
// departs from the paper's rule is on the unexported levelCtl and in
// docs/ADMISSION.md ("Design"). [DAGOR.AdmitPriority] is one atomic
// load, a compare and one atomic add: a few nanoseconds and no
// allocation (BenchmarkAdmitPriority; docs/ADMISSION.md has the
// numbers).
// The level is what servers return on every response ([FormatLevel],
// [ParseLevel]; malformed values are refused and counted in
// [Malformed]). Entry services assign priorities: business priority
// from an [Actions] table (unlisted actions are the least important),
// user priority from a [UserHasher], a keyed hash over 128 levels
// re-keyed every hour.
//
// [DAGOR] implements [Admitter], the small interface through which the
// HTTP and gRPC middleware drive an admission controller; the lab's
// baselines (CoDel, Breakwater, random shedding) implement it too.
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
//		reject(req)              // dropped at dequeue
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
// # Concurrency
//
// A DAGOR is safe for concurrent use. [DAGOR.AdmitPriority] is one atomic
// load, a compare and one atomic add; a window closes under a mutex taken
// with TryLock, so no caller ever waits for it. Its calls do not allocate.
package admit

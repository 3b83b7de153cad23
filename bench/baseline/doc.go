// Package baseline holds the overload controls moirai is measured against,
// the ones a user would otherwise reach for, each faithful to its source:
// the lab's controllers (package bench) and suites (dagorsuite) run them
// beside moirai's own mechanisms. None of them is part of the library.
//
//   - [RPCCoDel] and [LIFOQueue]: CoDel as RPC servers run it (Maurer,
//     "Fail at Scale", ACM Queue 13(8), 2015): a server whose queue has not
//     emptied for an interval is overloaded and lets a request queue for
//     the target only, serving its queue newest first meanwhile (adaptive
//     LIFO). It rejects as requests leave the queue. This is the dagor
//     suite's codel.
//
//   - [CoDel]: Controlled Delay (Nichols and Jacobson, "Controlling Queue
//     Delay", ACM Queue 10(5), 2012; RFC 8289) applied to requests instead of
//     packets. It drops at dequeue time. This is the dagor suite's
//     codel-rfc and the inproc suite's codel.
//
//   - [Breakwater]: the server side of Breakwater (Cho, Saeed, Fried, Park,
//     Alizadeh and Belay, "Overload Control for µs-scale RPCs with
//     Breakwater", OSDI 2020): a credit pool sized by AIMD on the queueing
//     delay. It refuses at arrival.
//
//   - [Random]: DAGOR's random-shedding baseline: the same detection as
//     [admit.DAGOR], an admitted fraction instead of a level.
//
//   - [SRE]: client-side adaptive throttling (Google SRE book, K = 2); a
//     client-side mechanism with Allow/Record instead of the Admitter
//     interface.
//
//   - [Protego]: victim dropping (Cho et al., NSDI'23), a [policy.Policy]
//     that cancels the requests whose wait in progress at a lock or queue
//     reached the delay budget.
//
// RPCCoDel, CoDel, Breakwater and Random implement [admit.Admitter], so the HTTP and
// gRPC middleware run them where they would run DAGOR; the package admit's
// documentation says how a server drives one. Their behaviour is a
// deterministic function of the sequence of calls, which is what the
// scripted tests in this package check.
//
// # CoDel as RPC servers run it
//
// "Fail at Scale" describes the CoDel Facebook's RPC servers run: if the
// queue has not been empty at any time in the last interval N (100 ms), a
// request may spend only M (5 ms) in the queue; if it has, it may spend N.
// A request that overstays is dropped instead of served. Adaptive LIFO goes
// with it: while a queue is forming, the server serves the newest request
// first, since its client is the likeliest to still be waiting. [RPCCoDel]
// keeps the backlog from the calls to Admit and Started, and with it the
// last time the queue was empty; [RPCCoDel.Timeout] is the time a request
// arriving now may queue, for a queue that drops its requests when their
// time is up (the paper's queue does; the dagor suite's M waits for a
// slot no longer than that), and [RPCCoDel.Started] rejects a request that
// queued longer than the time allowed as it leaves. [LIFOQueue] is the
// worker queue with the LIFO switch; [WithDequeueCheck] makes it call
// Started as it hands a request a freed slot, as a worker thread taking
// requests off its queue does, and hand the slot on at once if Started
// refuses. Where the check runs matters: made by the request itself once
// its goroutine runs, it counts the goroutine's scheduling delay as
// queueing, which on a loaded machine often exceeds the 5 ms target, so
// that most requests handed a slot were rejected and the slot passed from
// one late goroutine to the next (the dagor suite's codel fell to 0.1 of
// DAGOR's success on M1 at 4× that way, under a load average of 14–28 on
// two cores; TestRPCCoDelTraces replays it with generated wake-up delays).
//
// Unlike the RFC's CoDel it needs no drop schedule to converge: under a
// steady overload it serves every request at most M old and rejects the
// rest at once, so a server with a deadline far longer than M keeps its
// goodput at its capacity (checked on generated Poisson traces in
// TestRPCCoDelTraces); what it cannot do is tell the calls of one task
// from another's, which is what DAGOR adds.
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
// # Protego
//
// Protego (Cho et al., "Protego: Overload Control for Applications with
// Unpredictable Lock Contention", NSDI'23, the sibling of Breakwater) drops
// requests whose lock waits would make them miss their latency objective:
// its active synchronization queue management (ASQM) gives each lock's
// wait queue a delay budget and aborts a request whose wait there crosses
// it. The Atropos paper uses it, as here, as a victim-dropping baseline: a
// task that has been waiting on one lock or queue, in the wait in progress,
// for the budget or more is dropped. Earlier waits, on that lock or
// elsewhere, do not count: a job that takes a lock between batches and
// queues briefly each time (the undo-purge case's purge) is not a victim
// however much its short waits add up to. Protego drops the victims, never
// the holders: a task that waits for nothing is never proposed, however
// long it waited before, and the task that holds the contended lock keeps
// running.
//
// What this Protego does not do: it does not act inside the locks (ASQM
// drops a request from a lock's wait queue the moment its wait crosses the
// budget; here the controller's loop decides from snapshots, so a drop lags
// by up to one tick, and the start of a wait is told from the snapshots'
// count of waits begun), it has no admission control of its own (Protego
// pairs the drops with a throughput-driven admission controller; see
// [CoDel] and [Breakwater] for admission baselines), and it uses one
// budget for every lock and task. Only tasks marked cancellable and not
// already cancelled are proposed; the controller's own safety rules (one
// cancellation per task, a minimum interval) still apply.
//
// # Anchors and settings
//
// Each baseline is checked against the published shape of its source
// before a claim rests on it, or the reason none exists is given here, and
// is run at its default beside its best setting where a suite sweeps it.
//
//   - [RPCCoDel] (the dagor suite's codel): the DAGOR paper (Zhou et al.,
//     SoCC 2018) reports every overload control performing about as DAGOR
//     does on one-call tasks (M¹) and CoDel well below it on M²–M⁴. The
//     suite's targets record it ("anchor of codel on M1", within 10 % of
//     dagor's success rate at 2× and 4×), and TestRPCCoDelTraces checks the
//     control law on generated Poisson traces. The suite sweeps its target
//     and interval (codel@sweep) and reports its best setting per workload
//     beside the default, 5 ms and 100 ms.
//   - [CoDel] (codel-rfc in the dagor suite, codel in the inproc suite):
//     TestCoDel's scripts replay RFC 8289's control law step by step; no
//     paper gives a figure of it on RPC requests. Swept like RPCCoDel in
//     the dagor suite (codel-rfc@sweep).
//   - [Random]: the DAGOR paper's random shedding, below DAGOR on M²–M⁴ by
//     more as the calls per task grow; the dagor suite's rows. Its
//     detection is DAGOR's; the suite sweeps its window and queueing-time
//     threshold (random@sweep: 50, 100, 200 ms × 5, 10, 20, 40 ms) and
//     reports its best setting per workload beside the default.
//   - [SRE]: TestSREThrottlesWhenRejected checks the SRE book's rejection
//     probability; its shape, near the optimum on one-call tasks, is the
//     dagor suite's M1 rows. K = 2 is the book's setting; the dagor
//     suite sweeps it (sre@sweep: 1.1, 1.5, 3).
//   - [Protego]: the Atropos paper reports it dropping about half the
//     requests on the lock cases. It drops the requests that meet the
//     culprit's hold of the lock with more than their budget of it left,
//     so the figure holds where the culprit holds its lock in one stretch
//     for about half the run (table-lock, backup-lock, wal-group,
//     kv-range); undo-purge (the purge holds the log in 250 ms batches for
//     about 0.4 of the run) and compaction-rwlock (0.3 of the run) expose
//     about 30 % of their requests (bench.Case.LockExposure). The report's
//     anchor table records both per run; TestProtegoWaitInProgress checks
//     the budget per lock wait. Its budget is the case's objective, as in
//     the paper; protego@sweep runs 0.5× and 2× of it.
//   - [Breakwater]: its paper's figures are for µs-scale RPCs with credits
//     at the clients, which an in-process server does not have, so no
//     published figure applies; TestBreakwater checks its AIMD law
//     against the authors' formula. breakwater@sweep fixes its target at
//     500 µs, 5 ms and 20 ms beside its default, scaled to the service.
//   - statement_timeout and lock_timeout, pt-kill (the postgres and mysql
//     suites, package dbsuite): the servers' own settings and Percona's
//     tool, run as operators run them; no paper gives a figure for these
//     workloads. Their defaults are the suites' flags; timeout@sweep and
//     ptkill@sweep run 1s/1s, 2s/1s, 10s/5s and a busy time of 1, 2 and
//     10 s beside them.
//   - The path-fence suite's fixed-K fences are swept over K (the
//     fixed-6…fixed-14 rows, the best fixed split named in its report);
//     its static controller is go-concurrency-limits' Vegas at that
//     library's defaults, swept over its queue thresholds and smoothing
//     (static@sweep, pathfencesuite.Vegas), with static per-service
//     limits (limit-N) beside it.
//   - The cpu suite's static pools (ignorant, optimal) are the two ends of
//     a fixed pool's size, the budget and budget / K, and static-N the
//     sizes between; no paper figure.
//
// The report ends RESULTS.md with the table of these sources, checks and
// sweeps and each check's result in the saved runs.
//
// # Concurrency
//
// All of them are safe for concurrent use. CoDel's and Breakwater's Admit
// is a few atomic loads and compares and at most one atomic add or
// compare-and-swap (retried under contention); Breakwater's Started and
// Done are lock-free except once per control period, and CoDel's Started
// takes one mutex to run its state machine. None of them allocates.
// A Protego's Decide takes a mutex to read and replace where each task's
// wait in progress began.
//
// # Usage
//
//	p := baseline.NewProtego(50*time.Millisecond, baseline.WithProtegoMaxDrops(8))
//	for _, d := range p.Decide(snap) {
//		// act on d.Task; d.Details says what it waited and the budget
//	}
package baseline

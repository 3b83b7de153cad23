// Package cancel holds moirai's cancellation policies: pure functions from a
// [snapshot.Snapshot] to [policy.Decision]s that name tasks to cancel.
//
// # Atropos
//
// [Atropos] is targeted cancellation (Atropos, SOSP'25, §3–§4): when a
// resource is overloaded, cancel the one task whose cancellation frees the
// most of the contended resources, instead of dropping the tasks that wait
// for them. One decision goes:
//
//  1. Contention. Each resource's level C_r = D_r / T_exec over a sliding
//     window of the snapshots the policy observed (package estimate says
//     what D_r is per kind). A resource is contended when C_r reaches a
//     threshold (0.1) and, for locks and queues, someone waits for it now.
//     No contended resource, no decision: the overload is not one a
//     cancellation can relieve.
//  2. Candidates. Every cancellable, not yet cancelled task with a gain on
//     a contended resource: its future usage, current usage × (1−p)/p,
//     with p its reported progress or, when it reports none, estimated
//     from its class's learned durations. Gains below a floor are not
//     worth a cancellation: of lock or queue time, half the tightest
//     objective of the tasks waiting for the resource (WithMinGain, half
//     the default objective, when none has its own); of a pool, 1 %. That
//     floor is what keeps a victim that holds the lock for a moment from
//     being mistaken for the culprit.
//  3. Choice. Gains become shares of each resource's total; the
//     non-dominated candidates (no other gains at least as much on every
//     contended resource and more on one) form the skyline, and the one
//     with the largest Σ_r C_r · share_r is cancelled — or, among those
//     whose cancellation alone frees enough of the most contended
//     resource, the one whose cancellation loses the least work.
//     Background work (task.Background) goes first: while a background
//     task is a candidate, the choice is made among the background
//     candidates alone, by the same rule.
//
// # Known-heavy classes
//
// Contention measured over the window lags an overload by the window's
// length, and the work a cancellation throws away grows all that time. A
// class the policy has seen use a lock or queue for the minimum gain or
// more is known to be heavy on it: seen end having used that much, or
// cancelled having used that much already, or having used what its
// reported progress says is that much in all (package estimate's Uses
// learns a cancelled task's use as a lower bound of its class's, for a
// class none of whose tasks has ended on its own: a recurring culprit,
// each of whose tasks is cancelled before it ends, is known from its
// first cancellation on). When known-heavy tasks hold a lock while others
// wait, or their demand on a queue (the units they hold and wait for)
// leaves the other tasks less than their mean demand a plus √a (the
// square-root headroom re-execution admits by; a is the moving mean of
// the units of tasks of classes seen to end light on it, never of a heavy
// class's first task, which ran with no history), the resource counts as
// contended from the acquisition that made it so ([Level].KnownHeavy),
// whether or not its measured level has reached the threshold too, the
// decision needs no confirmation time, and step 3 picks among the
// candidates as usual: the least loss among those that free enough, which
// is the newcomer that has used almost nothing yet (a known-heavy
// newcomer still waiting for its first units of a queue is waited for:
// nothing is decided until it holds one). A class known only by a lower
// bound has at least the minimum gain left whatever its use so far; a
// bound under the minimum gain says nothing of the class. A class's first
// task has no history and is found by the measured contention; a lone
// known-heavy task that leaves the others room is left alone however full
// the resource is for a moment. A lock or queue some class is known to
// be heavy on is armed ([Atropos.WakeOn], policy.Waker): a task beginning
// to wait there steps the controller's loop at once (at most once a
// millisecond), so a known-heavy holder is decided on the instant the
// first request queues behind it, not at the loop's next tick. A task of
// a mixed class (whose history says nothing of any one of its tasks) is
// known heavy by its own reported progress: holding a lock or queue
// while others wait, with a progress of at least estimate.MinProgress
// that leaves the minimum gain of use, it is decided on as a known-heavy
// class's task is, and a resource some class is mixed on is armed too.
// A reported progress under estimate.MinProgress is taken for none
// (estimate.ReportedProgress).
//
// # Recurring culprits
//
// With [WithPreemption](n), a class n of whose tasks were cancelled while
// they held a lock, none of its tasks having ended on its own, is a
// recurring culprit on that lock: [Atropos.Preempt] gives the controller
// a standing order (policy.Preempter) to cancel its next task as it takes
// the lock, before anyone waits, while others have waited for the lock
// within the last 10 s. A class one of whose tasks ever ended on its own
// is never preempted, and a lock nobody waited for in that time lets the
// class's next task run.
//
// # A host that takes the CPU away
//
// On a machine whose other processes keep the CPU busy, every hold is
// stretched, and so are the durations and uses learned from them: age
// and holds are then no evidence of a culprit. A task of a class whose
// tasks typically end having used less than the minimum gain of a
// resource, holding one unit of it with no progress of its own, is no
// culprit there whatever its age; nor is one of several live tasks of a
// class with no history on the resource (the first requests of a
// stream, stretched alike). A class is mixed only on a live task that
// holds several units or reports progress (estimate.Uses.Mixed). And
// every cancellation is judged: when, a second after it, the others
// still wait behind tasks of the class cancelled, or wait behind them
// again within the contention window after the backlog drained, the
// blame is refuted, and until nobody has waited for the resource for a
// second a task of that class is a candidate there only on its reported
// progress ([Level].Unrelieved). Others waiting behind tasks of another
// class wait for another culprit, and refute nothing.
//
// The two ablations of the paper are variants: [Greedy] looks at the most
// contended resource only and takes its largest gain; [CurrentUsage] runs
// the multi-objective choice on current usage instead of future gain.
//
// The skyline is computed sort-first, behind a pre-filter: the 32 best
// candidates by score are compared with every other, and only those they
// do not dominate are sorted and compared with the skyline so far. A
// dominator always scores at least as high, so the result is the exact
// skyline; on the skewed gains of a real snapshot the pre-filter removes
// nearly everything, and 10,000 tasks × 8 resources are decided in well
// under a millisecond (BenchmarkDecide).
//
// Every decision carries its explanation: the contention levels, the
// candidate count and the skyline's size, the best candidates with their
// progress (and where it came from), gains and scores, and how many tasks
// were excluded and why ([Evaluation.Attrs]). [Atropos.Evaluate] returns
// the whole reasoning without deciding.
package cancel

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
//     from its class's learned durations. Gains below a floor (half the
//     objective of lock time; 1 % of a pool) are not worth a cancellation:
//     that floor is what keeps a victim that holds the lock for a moment
//     from being mistaken for the culprit.
//  3. Choice. Gains become shares of each resource's total; the
//     non-dominated candidates (no other gains at least as much on every
//     contended resource and more on one) form the skyline, and the one
//     with the largest Σ_r C_r · share_r is cancelled.
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
//
// # Protego
//
// Protego (Cho et al., "Protego: Overload Control for Applications with
// Unpredictable Lock Contention", NSDI'23, the sibling of Breakwater) drops
// requests whose lock waits would make them miss their latency objective.
// The Atropos paper uses it, as here, as a victim-dropping baseline: a task
// that is waiting now on a lock or a queue, and whose accumulated waits on
// locks and queues (the wait in progress included) have reached its latency
// budget, is dropped. Protego drops the victims, never the holders: a task
// that waits for nothing is never proposed, however long it waited before,
// and the task that holds the contended lock keeps running.
//
// What this Protego does not do: it does not act inside the locks
// (Protego's active synchronization queue management drops a request from a
// lock's wait queue the moment its wait crosses the threshold; here the
// controller's loop decides from snapshots, so a drop lags by up to one
// tick), it has no admission control of its own (Protego pairs the drops
// with a throughput-driven admission controller; see package admit for
// admission baselines), and it uses one budget for every task. Only tasks marked
// cancellable and not already cancelled are proposed; the controller's own
// safety rules (one cancellation per task, a minimum interval) still apply.
//
// # Usage
//
//	p := cancel.NewProtego(50*time.Millisecond, cancel.WithMaxDrops(8))
//	for _, d := range p.Decide(snap) {
//		// act on d.Task; d.Details says what it waited and the budget
//	}
package cancel

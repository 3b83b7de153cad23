// Package cancel holds moirai's cancellation policies: pure functions from a
// [snapshot.Snapshot] to [policy.Decision]s that name tasks to cancel.
//
// It will hold the Atropos policies (SOSP'25: cancel the one
// task whose cancellation frees the most of the contended resources, with
// its greedy and current-usage ablations), which a later change adds. For
// now it holds the baseline they are compared against, [Protego].
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

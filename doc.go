// Package moirai is overload control inside a service: it keeps a latency
// objective under overload while dropping as little work as possible.
//
// This package is the runtime every mechanism stands on: a [Controller]
// that owns the process's tasks and resources, takes snapshots of who holds
// and who waits for what, runs detectors and policies on them, and acts on
// their decisions safely. The mechanisms (targeted cancellation, penalties,
// priority admission, path fences, CPU budget) plug in as policies and
// detectors; see package policy.
//
// # Model
//
// A [Task] is a unit of work: a request, a connection serving many requests,
// a background job. [Controller.Begin] starts one and returns its context,
// which is cancelled with cause [ErrCancelled] when the controller picks the
// task; [Task.OnCancel] registers the application's own cancel path.
//
// A resource is anything tasks contend on: a lock, worker slots, a buffer
// pool, CPU, I/O. The instrumented primitives ([Mutex], [RWMutex],
// [Semaphore], [Queue], [Memory]) record, per task, the time spent waiting
// for the resource, the time and units held (a hold in progress counts) and
// the evictions caused. Custom resources use the raw events of [Resource].
//
// A snapshot (package snapshot) is a copy of tasks × resources at one
// moment, plus what changed in the window since the previous one. Policies
// are pure functions of snapshots, so the same policy code runs in a
// process and, in moirai guard, outside a database.
//
// # The loop
//
// The controller's goroutine advances a coarse clock that the hot path
// reads with one atomic load (default resolution 1 ms) and steps the control
// loop: snapshot → detect → decide → act → record. It steps every coarse
// tick (20 ms) while healthy and every fine tick (5 ms), with a precise
// clock, while a detector fires. With no detector configured, policies run
// on every tick; continuous policies (policy.Continuous: penalties) run on
// every tick in any case, and ask for the fine tick while they track
// interference.
//
// # Targeted cancellation by default
//
// Unless configured otherwise, a controller runs Atropos: the SLO detector
// (package detect) on the objective of [WithSLO], which counts a request
// queued behind a long holder at its predicted latency, and the throughput
// collapse detector; and the multi-objective cancellation policy (package
// cancel), which confirms that a resource is contended and cancels the
// cancellable task whose cancellation frees the most of it. Contention and
// gains are estimated in package estimate; the typical duration of each
// task class, which gives the progress of tasks that report none, is
// learned from the loop's snapshots. [WithTraceOnly] turns every mechanism
// off; [WithPolicy] and [WithDetector] replace the defaults.
//
// # Penalties
//
// The defaults include pBox's penalties (package penalty;
// [WithPenalties](false) leaves them out): a task that defers others
// beyond their isolation goal on a shared resource is delayed, adaptively,
// at its next acquisition while it holds nothing, and a request that ends
// before it passes the penalty to the next request of its class.
// Precedence: penalties act on every tick, cancellation only under
// resource overload; a penalized task remains a cancellation candidate; a
// cancellation drops the pending penalty, and a cancelled task is never
// penalized.
//
// A cancelled request need not be lost: [Retry] (and the httpmw
// middleware's re-execution) runs it again, once and not cancellable, when
// its class's demand fits what the resources it used have spare, its class
// capped meanwhile, or drops it with [ErrNoWindow] when no window comes in
// time. Overload without a contended resource is
// reported as regular overload ([WithRegularOverload]), for admission
// control.
//
// # Safety
//
// Only tasks marked cancellable are cancelled, each at most once, no sooner
// than a minimum interval after the previous cancellation (100 ms). Hooks,
// policies, detectors and observers are user code: they never run under a
// runtime lock, their panics are recovered and reported, and a hook that
// blocks is reported without holding up the loop. A task whose request ended
// without End is reported and evicted ([WithUnendedGrace]), so the registry
// stays bounded; Close reports tasks still live. Bad input never crashes the service: invalid specs are defaulted and
// reported, releases without acquires are refused and counted, events after
// End are dropped and counted.
//
// # Cost
//
// An uncontended Lock and Unlock of a moirai [Mutex] cost one
// compare-and-swap each, as sync.Mutex's do: the mutex's state word names
// its holder, and the finished hold is added to the holder's counters after
// the release. Other events are one or two atomic operations on the task's
// own counters. None allocates, takes a global lock or looks up a name.
// Begin and End take one of a few shard locks and allocate one small
// object; the task's cancellable context is created only when something
// waits on it. See bench_test.go for the benchmarks, each beside its
// standard-library baseline, and docs/DESIGN-NOTES.md for what they
// measured.
package moirai

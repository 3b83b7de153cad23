// Package moirai is overload control inside a service: it keeps a latency
// objective under overload while dropping as little work as possible.
//
// One controller per process, a task per request (package httpmw begins
// and ends it for net/http), the resources it contends on instrumented,
// and progress reported at the safe points where the work checks for
// cancellation; this is the package's Example, which runs:
//
//	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
//	defer ctl.Close()
//	orders := ctl.Mutex("table:orders")
//
//	handle := func(ctx context.Context, rows int) error {
//		ctx, t := ctl.Begin(ctx, moirai.Spec{Class: "update-orders", Cancellable: true})
//		var err error
//		defer func() { t.End(err) }()
//		if err = orders.Lock(ctx); err != nil {
//			return err
//		}
//		defer orders.Unlock()
//		for i := range rows {
//			if err = ctx.Err(); err != nil { // a safe point
//				return context.Cause(ctx)
//			}
//			moirai.From(ctx).Progress(int64(i+1), int64(rows))
//		}
//		return nil
//	}
//	fmt.Println(handle(context.Background(), 100))
//
// This package is the runtime every mechanism stands on: a [Controller]
// that owns the process's tasks and resources, takes snapshots of who holds
// and who waits for what, runs detectors and policies on them, and acts on
// their decisions safely.
//
// The five mechanisms sit in two places. Targeted cancellation (package
// cancel) and penalties (package penalty) are policies of the controller's
// loop: they plug in through package policy, read snapshots and return
// decisions that the controller carries out. Priority admission (package
// admit), path fences (package fence) and the CPU budget (package cpu) are
// not policies: they act inline, on the request's way in, with their own
// state and no snapshot. The middleware (httpmw, grpcmw) wires admission
// and fences around each request; a cpu.Pool runs work on a controller's
// [Queue] (cpu.WithQueue), so the waits for its workers are seen by the
// loop's policies like any other resource's.
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
// on every tick; continuous policies (policy.Continuous: penalties, early
// action, and targeted cancellation for classes known to be heavy) run on
// every tick in any case, told by the snapshot (Quiet) when no detector
// fires, and ask for the fine tick while they track interference.
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
// learned from the loop's snapshots. [WithoutMechanisms] turns every mechanism
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
// stays bounded; Close reports tasks still live. Bad input never crashes
// the service: invalid specs are defaulted and reported, releases without
// acquires are refused and counted, events after End are dropped and
// counted.
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
// standard-library baseline, and docs/RUNTIME.md for what they measured.
//
// # Packages
//
// The runtime and its data:
//
//   - moirai (this package): the [Controller], its loop, [Retry], and
//     aliases of the task and resource types an application uses.
//   - task: tasks, their lifecycle, their lock-free per-resource
//     counters, and the sharded registry that holds them.
//   - resource: named resources of five kinds, their raw events, and the
//     instrumented primitives (Mutex, RWMutex, Semaphore, Queue, Memory).
//   - snapshot: the value policies read, a copy of tasks × resources at
//     one moment; latency: the histogram of finished tasks it carries.
//   - policy: the seam between the loop and the mechanisms that decide
//     (Policy, Detector and their optional interfaces; Decision, Record).
//
// The mechanisms:
//
//   - detect: when to look (the SLO and throughput-collapse detectors).
//   - estimate: contention levels, gains and learned class durations,
//     pure functions of snapshots.
//   - cancel: Atropos, the cancellation policy, and its variants; it
//     chooses, among the tasks that free enough of the contended
//     resources, the one whose cancellation loses least, and never a
//     task that waits behind another (chain.go charges a chain's holds
//     to its root).
//   - penalty: pBox's penalties, a continuous policy.
//   - trend: early action on a task whose share of a
//     capacity-bounded resource grows while the others' misses or waits
//     rise, before any objective is missed.
//   - admit: DAGOR's priority admission and its priorities on the wire.
//   - fence: PathFence's per-path reservations of a worker pool, the
//     classifier that learns a request's path, and the SCT tuner.
//   - cpu: the CPU budget from affinity and cgroups, and the pool sized
//     to the share of the host the neighbours leave.
//
// At the edges:
//
//   - httpmw, grpcmw: the net/http and gRPC middleware (server and
//     client) that make requests tasks and wire admission and fences;
//     grpcmw is a module of its own (it requires grpc).
//   - sqlmw, pgxpoolmw: a database/sql pool and a pgxpool pool as traced
//     resources (pgxpoolmw is a module of its own: it requires pgx).
//   - metrics, debugpage, flightrec: Prometheus collectors (metrics is a
//     module of its own), the live page, and the execution-trace flight
//     recorder.
//   - otelmoirai: OpenTelemetry (a module of its own, on the API alone):
//     each decision on its request's span and as a log-based event,
//     metrics after the semantic conventions, trace ids in the decision
//     records (the root's seams: WithDecisionObserverContext,
//     WithTraceID, Controller.DecisionsOn, PenaltyServed, ReexecutionOf).
//   - guard, guard/postgres, guard/mysql: the same cancellation policy
//     applied to a database server from outside, through its views (a
//     module of its own, with the database drivers).
//   - analysis/...: the analyzers of `moirai vet` (and of cmd/moirai-vet,
//     for go vet -vettool), which find the resources worth instrumenting
//     in a program.
//   - cmd/moirai: the command (guard, vet, cpus, demo, bench), a module
//     of its own; bench and its subpackages (a module of its own, the
//     lab): the evaluation harness, its cases (bench/CASES.md), the
//     baselines (bench/baseline), the suites and the demo's service.
//   - internal/taskx: the task runtime (tasks, their accounting, penalties
//     and cancellation, the registry), of which package task is the
//     public face; the loop, the snapshot builder and the primitives call
//     its functions directly. internal/clock: the coarse clock the hot
//     path reads; internal/resrt: the primitives' constructors for the
//     controller; internal/mwx: what httpmw and grpcmw share;
//     internal/waitq: the intrusive wait queue of the primitives and the
//     fence; internal/sleep: a context-aware sleep.
//
// # How a request flows
//
// With net/http (grpcmw is the same), httpmw.Handler sees a request
// arrive and, in order:
//
//  1. Admission. With httpmw.WithAdmission, the request's priority (its
//     own from a trusted peer, else the entry service's assignment) is
//     checked against the DAGOR level (admit.DAGOR.AdmitPriority, a
//     load, a compare and an atomic add): a refusal is a 503 with
//     Retry-After, before anything else is spent. Every response carries
//     the level, for the callers to shed by. An admitted request reports
//     its queueing time (httpmw.WithArrival), which moves the level
//     window by window.
//  2. Fence. With httpmw.WithFence, the request takes a permit of its
//     path's reservation (fence.Fence.Acquire), the path learnt from
//     the calls its kind makes; a full line is a 503.
//  3. Task. [Controller.Begin] makes the request a task (or [Retry] does,
//     with re-execution); its context carries the task. A Handler nested
//     in another of the same controller begins none: it refines the
//     outer one's task with its route's options (class, objective,
//     background work), so a request is one task however many layers.
//  4. Work. The handler's instrumented primitives, and a cpu.Pool built
//     on a controller's queue, charge every wait and hold to the task,
//     a few atomic operations each. Calls it makes through
//     httpmw.Transport carry the task's priority, learn the downstream's
//     level, shed locally what that level would refuse, and report each
//     call to the fence's classifier.
//  5. The loop, meanwhile. Every tick the controller snapshots tasks ×
//     resources; detectors say whether latency or throughput is in
//     trouble; penalties decide on every tick and cancellation while a
//     detector fires; the controller checks each decision against its
//     safety rules and acts: a penalty is served at the task's next
//     acquisition while it holds nothing, a cancellation cancels the
//     task's context with [ErrCancelled] and runs its OnCancel hooks.
//  6. End. The task ends with the handler's result; its counters are
//     folded into the resources' totals and its latency into the
//     histograms the detectors read. The fence permit is released.
//
// The mechanisms' documents are in docs/: CANCELLATION.md, PENALTIES.md,
// ADMISSION.md, FENCE.md, CPU.md, GUARD.md, each with its design and the
// measurements behind it; RUNTIME.md for this package's own.
package moirai

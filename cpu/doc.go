// Package cpu sizes work to the CPUs a process really has: its CPU budget
// (affinity mask and cgroup quotas) and, moment to moment, the share of
// the host's busy CPU time its neighbours leave it. It is the CPU-budget
// mechanism of moirai (friendlypool: Jeffery, Jensen and Mortier).
//
// A process that sizes its worker pool by the host's CPU count
// overcommits the CPUs as soon as a quota or a busy neighbour says
// otherwise: every runnable thread beyond the CPUs stretches the work
// already running, and the tail latency of every process on the host
// pays. Go reads only the leaf cgroup's quota, and only since 1.25;
// nothing in Go adapts to neighbours.
//
// # Goals and non-goals
//
// Goals: a budget that is right on cgroup v1, v2 and hybrid hosts,
// nested cgroups and containers, and that says how it was derived; a pool
// that runs exactly as many workers as the budget and the neighbours
// allow, at a cost far below 1 % of one CPU; waits that the rest of moirai
// sees. Non-goals: scheduling (the kernel does it), CPU pinning, and
// fairness between pools of one process (give them one pool).
//
// # The budget
//
// [ReadBudget] takes a file system rooted at "/" (os.DirFS("/"), or a
// fake tree in tests) and returns a [Budget]: the smallest of the
// affinity mask (Cpus_allowed_list of /proc/self/status) and the quota of
// the process's cgroup and of every ancestor visible under its mount,
// fractional (cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2
// cpu.max). The cgroup is located through /proc/self/cgroup and
// /proc/self/mountinfo; where the v1 cpu controller is mounted it is read
// there (the controller cannot be on v2 at the same time), else on v2. A
// missing or unreadable file falls back to the next source, and a
// malformed or absurd value (a quota of zero or below, a period outside
// the kernel's 1 ms to 1 s, a quota larger than the host) is rejected
// with an error wrapping [ErrAbsurd]; every source consulted is recorded
// in [Budget].Steps with its value and the reason it was used or not.
// ReadBudget never fails: at worst the budget is runtime.NumCPU.
//
// # The neighbours
//
// At each clock tick the pool's loop reads three cumulative counters (a
// [Sample]): its own CPU time (/proc/self/stat, parsed from the last ')'
// so that a command name with spaces and parentheses cannot shift the
// fields), the host's busy time and the host's total time (the first
// line of /proc/stat), and notes how much work it runs. Over a sliding
// window of the last ticks it measures what the rest of the host used,
// others = host · (Δbusy − Δself) / Δtotal, and from that the CPUs of
// the budget left to it, free = min(CPUs, host − others). Reading the
// host, not a protocol: a neighbour can be another pool, a pool that
// ignores its budget or a plain CPU hog.
//
// Use is not demand. On a saturated host (busy above 90 % of the window)
// the scheduler shares the CPUs out among the runnable threads, and what
// a neighbour uses understates what it wants by as much as the pool's own
// use understates its running work: the loop scales the neighbours' use
// by running / self. Without it a pool that runs a worker too many sees
// its neighbours squeezed, and so room for itself, and keeps the worker.
// Self is taken one clock tick high there, the most the counter's
// rounding can hide, so that a host exactly full (nobody waiting) does
// not read as oversubscribed when the counter rounds down.
//
// On a virtual machine the time the hypervisor stole (the steal field of
// /proc/stat, part of the total and not of the busy time) is a CPU the
// host did not have: it counts with the neighbours, and the host is
// saturated when its busy time fills 90 % of what the hypervisor left.
// Steal comes in bursts, so the four-window look of a rise (below) leaves
// it out, and a rise undone by steal alone is no failed probe.
//
// The active count follows free (times the overcommit factor O, see
// [WithOvercommit]) through overlapping bands ([Next]): n holds while
// O·free is in [n − 0.75, n + 0.5), rises when it is above, falls when
// below; the bands of n and n + 1 overlap by a quarter of a worker, so
// the estimate's noise moves the count once, not back and forth. A fall
// happens at once, and is also taken from the last third of the window,
// where a returning neighbour shows first; no rise follows it before a
// window has measured the new count. A rise needs the room over the last
// four windows too: a neighbour whose queue empties for a moment leaves
// room that is gone a moment later, and work started into it runs beside
// the neighbour's until it ends. A rise is a probe of CPU that
// looked free: after it the count waits a window before rising again,
// and a rise undone within two windows (another pool took the same CPU)
// doubles, with jitter, the wait before the next, so that pools that rose
// together do not rise together again ([WithTolerance] sets the grow
// margin, 0.5 by default).
//
// [Active] is the friendlypool paper's one-shot rule, ⌈O · share ·
// CPUs⌉ with share = Δself / Δbusy; `moirai cpus` prints it. The loop
// does not use it: a share grows only by using more CPU, so ⌈⌉ claims a
// worker more than the process uses, and on a small host two pools
// settle at two workers and one on two CPUs.
//
// The clock tick is sysconf(_SC_CLK_TCK). Go has no sysconf without cgo
// and golang.org/x/sys/unix does not expose it, but C libraries answer it
// from the AT_CLKTCK entry of the auxiliary vector the kernel hands every
// process, and the kernel publishes that vector in /proc/self/auxv:
// [ReadClockTick] reads it there (100 Hz on common kernels, whatever
// CONFIG_HZ is). No value is assumed: if it cannot be read, [NewPool]
// fails unless [WithTick] sets the period.
//
// The counters advance in whole clock ticks, so over one 10 ms tick the
// process's time moves by 0, 1 or 2 ticks and what one tick measures is
// mostly rounding. The loop therefore re-evaluates at every tick but
// measures over a sliding window of the last ticks (10 by default,
// [WithWindow]). After a window without work the loop stops
// ticking, and new work wakes it: an idle pool costs nothing.
//
// # The pool
//
// A [Pool] admits its work through a [resource.Queue] whose slots are the
// active count: [Pool.Submit] runs a function in the caller's goroutine
// once a slot is free, [Pool.Go] in a goroutine of its own. Work beyond
// the active count waits (parks) in the queue's FIFO line and is let
// through when the count rises or running work ends: exactly the active
// count runs, never one more; when the count falls, running work finishes
// and no new work starts until fewer than the new count run. The count is
// never below 1, so queued work always drains. With [WithQueue] the queue
// is a controller's (moirai.Controller.Queue), and every wait for a
// worker is a wait on that resource, charged to the task in the work's
// context, that admission, cancellation and penalties see.
//
// The "workers" are slots, not long-lived goroutines: in Go a goroutine
// parked in a queue costs a few kilobytes and no CPU, and the OS threads
// that run work are bounded by the slots (and by GOMAXPROCS). With
// [WithGOMAXPROCS] the loop drives runtime.GOMAXPROCS to the active count
// instead, bounding every goroutine of the process.
//
// # Concurrency
//
// One goroutine runs the loop; it alone reads the [Reader] and resizes
// the queue. The queue's own lock orders waiters. Pool.mu guards only the
// closed flag and the admission of new work against Close; no lock is
// held while work runs.
//
// # Usage
//
//	pool, err := cpu.NewPool(cpu.WithQueue(ctl.Queue("cpu", 1, 0)))
//	if err != nil { ... }
//	defer pool.Close()
//	err = pool.Submit(ctx, func(ctx context.Context) error {
//		return render(ctx, req) // CPU-bound work
//	})
//
// `moirai cpus` prints the budget, its derivation and the current share.
// [StepInfo] (through [WithObserver]) and [Stats] give what the loop
// measured and chose at each tick.
//
// # Options
//
// [NewPool] takes [Option] values, made by the With functions. They set a
// configuration of the package's own, which NewPool validates once all of
// them ran: it fails with an error naming the first option whose value is
// invalid.
package cpu

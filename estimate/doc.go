// Package estimate turns a [snapshot.Snapshot] into the two quantities
// Atropos decides on: how contended each resource is, and how much of each
// contended resource cancelling a task would give back. Everything here is
// a pure function of its inputs, except [Durations], which learns the
// typical duration of each task class from the snapshots it is shown.
//
// # Contention
//
// The contention level of resource r over a snapshot's window is
//
//	C_r = D_r / T_exec
//
// the fraction of the tasks' execution time in the window lost to r.
// T_exec is the execution time of every task in the window: the completed
// tasks' execution time plus, for each live task, its execution time capped
// at the window. D_r depends on the kind:
//
//   - Lock, Queue, IO: the time tasks spent waiting for r in the window.
//   - Memory: the time tasks spent waiting for evicted data to come back
//     (MissBegin/MissEnd) in the window, weighted by the eviction ratio
//     ΣE/ΣM: the units evicted over the misses of the window, capped at 1.
//     A pool whose misses find free room is warming up, not contended; a
//     pool whose every miss evicts something is turning over. (A ratio over
//     the pool's size instead would depend on the window's length: a 10 ms
//     window of a heavily polluted pool evicts a tiny share of it.)
//   - CPU: the time tasks spent runnable but not running. Go exposes no
//     per-goroutine run-queue time; the process-wide histogram
//     /sched/latencies:seconds of runtime/metrics cannot be charged to a
//     task. The best proxy that can be charged is the application's own:
//     the waits recorded on a KindCPU resource that models the processors
//     (tokens, a CPU-bound worker pool), which is what this package reads.
//
// C_r is clamped to [0, 1]: NaN, infinite or negative inputs (a clock that
// went backwards, a corrupt snapshot from an external source) give 0, never
// a value that could win a comparison.
//
// # Gain
//
// The gain of cancelling task t on resource r is its future usage of r:
//
//	future(t, r) = current(t, r) · (1 − p) / p
//
// where p is t's progress. current(t, r) is, per kind: for Lock, Queue, CPU
// and IO, the time t has held r multiplied by the share of r's capacity it
// holds now, counted only while t holds r (a task queued behind the holder
// is a victim of r, not a user of it); for Memory, the units t evicted plus
// the units it holds.
//
// When t reports progress (done/total), p is that fraction. When it does
// not, p comes from its class's history (see [Durations]): with the
// durations of finished tasks of the class, p = age / E[D | D > age], the
// task's age over the expected total duration of a task of its class that
// has already run that long. Conditioning on survival is what makes the
// estimate useful for the tasks that matter: a scan that has run far longer
// than the class's median is not assumed to be nearly done. When the class
// has no finished task longer than age, p = 1/2: the task is expected to
// run as long again as it has run (the Lindy estimate, and Atropos's fixed
// guess). p is clamped to [0.01, 0.99], which bounds the factor (1−p)/p to
// [0.0101, 99].
//
// Gains are compared within a resource as shares: the policy weights
// share(t, r) = future(t, r) / Σ_t' future(t', r) by C_r, so resources of
// different units (seconds held, pages evicted) add up.
package estimate

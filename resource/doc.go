// Package resource is what tasks contend on: named resources of five kinds
// ([KindLock], [KindQueue], [KindMemory], [KindCPU], [KindIO]), their
// registry, the raw event vocabulary, and the instrumented primitives that
// emit the events themselves.
//
// # Events
//
// One vocabulary covers Atropos' and pBox's instrumentation:
//
//	moirai      Atropos                pBox
//	WaitBegin   slowByResource begins  PREPARE
//	WaitEnd     slowByResource ends    ENTER
//	Acquire(n)  getResource            HOLD
//	Release(n)  freeResource           UNHOLD
//	Evicted(n)  slowByResource (mem.)  —
//
// Each event is charged to the task in the context passed, at the cost of a
// few atomic operations on that task's own counters; an event from a
// context without a task is counted as untracked and otherwise ignored.
//
// # Primitives
//
// [Mutex] and [RWMutex] are context-aware locks: a waiter whose context is
// done leaves the queue at once and gets context.Cause(ctx), and a task
// cancelled by the controller fails its next lock, which is where a
// cancellation takes effect. [Semaphore] is a weighted FIFO semaphore;
// [Queue] a bounded set of worker slots with an optionally bounded line;
// both hand out a [Permit] to release. [Memory] accounts for a pool or cache
// without allocating anything itself.
//
// Misuse is handled as the standard library does where it panics (unlocking
// an unlocked mutex) and otherwise refused with an error and counted
// ([Resource.Misuse]): releasing more than was acquired, a permit released
// twice.
package resource

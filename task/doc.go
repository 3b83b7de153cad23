// Package task is moirai's model of work: tasks, their lifecycle, their
// lock-free per-resource accounting, and the registry that holds them.
//
// # Tasks
//
// Registry.Begin starts a [Task] described by a [Spec] and returns its
// context; Task.End ends it. The context carries the task ([FromContext])
// and is cancelled with cause [ErrCancelled] when the controller cancels the
// task (after the controller's safety checks), at which point
// the task's Task.OnCancel hooks, the application's own cancel path, run
// in their own goroutine. The context is created lazily: a task whose
// context nobody waits on costs no context.WithCancelCause.
//
// A Task's exported methods are what an application calls. The types are
// declared, with their methods' documentation, in the runtime's internal
// package internal/taskx, of which this package is the public face: Task,
// Registry, Spec and the others here are aliases of its types, so a
// *task.Task is the runtime's own task and the runtime calls its code
// directly. `go doc` shows an alias without its methods and fields: read
// them with go doc github.com/moirai-go/moirai/internal/taskx.Task (or
// .Registry, .Spec, .Options, .Usage, .Stats).
//
// Connection-scoped tasks that serve many requests mark each request with
// Task.Activate and Task.Freeze (pBox's activate/freeze); event-driven
// code in which one goroutine serves many tasks carries the right task into
// each piece of work with [NewContext] (pBox's bind).
//
// # Accounting
//
// Every event (a wait begun or ended, units acquired, released or
// evicted) is one or two atomic operations on the task's own counters: no
// global lock, no allocation, no lookup by name (resources are resolved to
// a [ResourceID] once). Hold and wait times include a hold or wait in
// progress, read with a single atomic load (see the comment on slot in
// internal/taskx/slot.go). A primitive may instead track its holds in
// progress itself and add each finished hold itself (resource.Mutex does, to cost what sync.Mutex costs, and so do
// the controller's semaphores for their holders of one unit);
// Options.LiveHold tells the registry about such holds.
//
// The counters live in an accounting block that the registry recycles: a
// block is zeroed when its task ends, waits at least a quarter of the
// clock's resolution before reuse, and is never touched by Begin, so a task
// that uses no resource costs no access to it at all. Each claimed slot
// carries a tag of its task's ID, so an event that races its task's End
// finds the slot no longer its own and changes nothing.
//
// # Registry
//
// The registry is split into shards (four per GOMAXPROCS) with a lock each;
// Begin and End take one shard lock, so they are O(1) and never contend on
// a global lock, and the controller copies the live tasks shard by shard
// without stopping anyone. The registry also keeps, per shard, the
// latency histogram and counts of ended tasks, and the counters of misuse
// ([Stats]): End called twice, events after End, releases without
// acquires, invalid specs, panicking or blocked hooks, and tasks whose
// context ended without End, which the registry evicts.
package task

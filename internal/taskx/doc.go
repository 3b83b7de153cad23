// Package taskx is the task runtime: tasks, their lifecycle, their
// lock-free per-resource accounting, their penalties and cancellation, and
// the registry that holds them. Package task is its public face: it
// declares aliases of this package's types (task.Task is [Task]) and
// forwards its few functions here, so the doc comments on the exported
// methods and fields below are the ones applications read.
//
// # Two audiences, one type
//
// A [Task]'s exported methods are what an application calls; the package's
// exported functions ([WaitBegin], [Acquire], [Cancel], [ReadSlots],
// [AppendLive] ...) are what the rest of the runtime calls: the primitives
// of package resource (the events), the controller and its snapshot
// builder (the readings and the actions), the middleware (refining the
// task an outer layer began). They are functions rather than methods
// because an exported method of Task would be a method of task.Task, on
// every application's side; as functions of an internal package, only the
// module's own packages can call them. Each is a direct call of the
// unexported method that does the work, inlined by the compiler, so
// go-to-definition from any call site reaches the code that runs.
//
// # Accounting
//
// Every event is one or two atomic operations on the task's own counters,
// in a block of slots the registry recycles (slot.go, registry.go); the
// layout and its costs are in docs/RUNTIME.md. A primitive may track its
// holds in progress itself and add each finished hold with [AddHold]
// (resource.Mutex and the controller's semaphores do), naming its holder
// by [HolderTag]; [Options.LiveHold] tells the registry about such holds.
package taskx

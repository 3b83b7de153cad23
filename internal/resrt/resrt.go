// Package resrt is the door through which the controller builds the
// primitives of package resource on its own clock, which applications do
// not see. Package resource fills it in
// its init function.
package resrt

// NewMutex is func(*resource.Resource, *clock.Clock) *resource.Mutex: a
// mutex that reads the coarse value of the controller's clock inline
// rather than through a function.
var NewMutex any

// NewSemaphore is func(*resource.Resource, int64, *clock.Clock)
// *resource.Semaphore: a semaphore that names its holders of one unit in
// its units word and holder slots, stamped by the coarse value of the
// controller's clock.
var NewSemaphore any

// NewQueue is func(*resource.Resource, int64, int64, *clock.Clock)
// *resource.Queue: NewSemaphore's queue.
var NewQueue any

// Arm is func(*resource.Resource, *func()): it sets the function called,
// on the waiting goroutine, as a task begins to wait on the resource (nil
// for none). The controller arms the resources where a wait would make a
// policy act, to step its loop at once rather than at its next tick.
var Arm any

// ArmPreempt is func(*resource.Resource, []string, func(*task.Task, int)
// bool): it sets the classes whose tasks the controller cancels as they
// take the resource, before they hold it (none: disarmed). A task of
// classes[i] about to take it is handed, on its own goroutine, to the
// function with i, which reports whether it cancelled the task (the
// controller's safety checks may refuse; see policy.Preempter).
var ArmPreempt any

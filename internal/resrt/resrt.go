// Package resrt is the door through which the controller builds the
// primitives of package resource on its own clock, which applications do
// not see (the pattern of internal/taskrt). Package resource fills it in
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

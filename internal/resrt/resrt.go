// Package resrt is the door through which the controller builds the
// primitives of package resource on its own clock, which applications do
// not see (the pattern of internal/taskrt). Package resource fills it in
// its init function.
package resrt

// NewMutex is func(*resource.Resource, *clock.Clock) *resource.Mutex: a
// mutex that reads the coarse value of the controller's clock inline
// rather than through a function.
var NewMutex any

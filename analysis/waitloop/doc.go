// Package waitloop defines an analyzer that finds hand-made waits: loops
// that wait (sleep, yield, wait on a condition or a channel) until state
// another goroutine changes says they may go on. Such a loop is a lock or
// a queue the program built itself, invisible to moirai unless it is
// marked with a raw resource's WaitBegin and WaitEnd.
//
// # Heuristic
//
// This is pBox's (Algorithm 2 of its paper) in Go: a for loop is a wait
// loop when
//
//   - its body calls a waiting function: time.Sleep, runtime.Gosched,
//     (*sync.Cond).Wait, a channel receive or a select without default,
//     or a wrapper of one, a function that must wait (see the blocking
//     package: on its normal path, error returns aside);
//   - the loop's condition, or the condition of an if that leaves the
//     loop (break or return) directly in its body, reads state shared
//     between goroutines: a package-level variable, a struct field, a
//     captured variable, a pointer parameter's target, or a call of one
//     of their methods (an atomic load). Channels do not count: a loop
//     around a select that returns when a stop channel closes is Go's
//     idiom for a goroutine's lifetime, not a wait for a resource;
//   - and the body does no other work: every call statement in it is a
//     wait, a lock or unlock, an atomic operation, a context or time
//     function, or logging. This is the part pBox does not need (C
//     programs rarely run a periodic job as a loop around a sleep); Go
//     programs do, and a loop that calls work between its waits is a
//     ticker loop or a worker, not a wait for a resource.
//
// Loops anywhere count, on a request path or not: a background goroutine
// that spins on a flag waits as much as a request does.
//
// # Known false positives and negatives
//
// A loop that polls for an external event (a file appearing) through a
// shared field reads as a wait loop. A wait loop whose work is a call
// statement (retry loops that call the operation) is missed, as are
// loops that wait through a function value or an interface.
//
// # Fixes
//
// None: marking the wait needs a resource (ctl.Register(name,
// moirai.KindLock, n)) and a task's context at the loop.
package waitloop

import "github.com/moirai-go/moirai/analysis/blocking"

// Analyzer reports hand-made wait loops.
var Analyzer = blocking.NewAnalyzer("waitloop",
	"find loops that wait until shared state changes (hand-made locks and queues): mark them with a moirai resource's WaitBegin/WaitEnd",
	run)

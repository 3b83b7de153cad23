package moirai

import (
	"fmt"
	"runtime/debug"
)

// callUser runs user code outside the runtime's locks, recovering and
// reporting a panic.
func (c *Controller) callUser(what string, fn func()) {
	catch(c, userCode{what: what}, struct{}{}, func() struct{} { fn(); return struct{}{} })
}

// userCode names the application's code that catch runs, for the report
// of a panic: what it is ("policy", "detector", "decision observer"), its
// name, and the method called. The message is built only on a panic, so
// naming costs the loop nothing.
type userCode struct{ what, name, method string }

// panicked is the error catch reports for a panic with value v.
func (u userCode) panicked(v any) error {
	who := u.what
	if u.name != "" {
		who += " " + u.name
	}
	if u.method != "" {
		return fmt.Errorf("moirai: %s panicked in %s: %v\n%s", who, u.method, v, debug.Stack())
	}
	return fmt.Errorf("moirai: %s panicked: %v\n%s", who, v, debug.Stack())
}

// catch runs fn, the application's code (a policy, a detector, an
// observer, a handler or hook it gave), and returns its result. If fn
// panics, catch reports the panic with who panicked and the stack, and
// returns fallback: user code never stops the controller's loop.
func catch[T any](c *Controller, who userCode, fallback T, fn func() T) (out T) {
	defer func() {
		if v := recover(); v != nil {
			c.report(who.panicked(v))
			out = fallback
		}
	}()
	return fn()
}

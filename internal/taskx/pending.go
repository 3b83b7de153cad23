package taskx

import (
	"context"
	"runtime"
)

// statePending marks a task begun before its class was known
// ([BeginWith]): until its Resolver has run, its spec's class is
// provisional.
const statePending = 1 << 7

// A Resolver gives the spec of a task begun with a provisional class
// ([BeginWith]). Resolve runs at most once, at the first of: the task
// read from its context by the application (moirai.From,
// task.FromContext), its first acquisition through an instrumented
// primitive, a refinement by an inner layer of middleware, the End of a
// penalized task (own is true: a goroutine of the task's work, which may
// read what that work writes), or a read of its spec by anyone else
// (Task.Spec: the controller's snapshots, the debug page; own is false:
// only what the task's work never writes may be read then). A task that
// ends before any of these keeps its provisional class. base is the spec the task began with; the spec Resolve
// returns is the task's from then on and is never modified (tasks may
// share it).
type Resolver interface {
	Resolve(base *Spec, own bool) *Spec
}

// Pending holds a task's Resolver until it runs. It is a field of an
// object that lives as long as the task's work (httpmw's answer to the
// request), so that a pending task costs no allocation of its own.
type Pending struct{ R Resolver }

// resolving is what a task's pend holds once its Resolver runs: nothing
// of the task's work stays referenced from the task.
var resolving Pending

// BeginWith is Begin for a task allocated in one object with a zero X,
// whose address it returns: what the caller keeps for each task and for
// as long as the task (httpmw: the request carrying the task's context)
// then costs no allocation of its own; the X is allocated even when the
// registry refuses the task. When p is not nil, the task's class is the
// one p's Resolver gives later (see [Resolver]): a middleware that learns
// the class only once the routing it wraps has run begins the task
// before, with a provisional class, instead of routing the request
// twice. p, and what its Resolver reads, must stay valid until the
// task's End has returned. The penalty a task of the class left for the
// next (carry.go) is taken once the class is known.
func BeginWith[X any](r *Registry, parent context.Context, spec Spec, p *Pending) (context.Context, *Task, *X) {
	both := new(struct {
		t Task
		x X
	})
	ctx, t := r.begin(&both.t, parent, spec, p)
	return ctx, t, &both.x
}

// Settled returns t with its class known, its Resolver run, on a
// goroutine of t's own work (see [Resolver]).
func Settled(t *Task) *Task {
	if t != nil && t.state.Load()&statePending != 0 {
		t.settle(true, false)
	}
	return t
}

// settle runs a pending task's Resolver (own: on a goroutine of the
// task's work), or waits for the goroutine that runs it: End must not
// return while a Resolver may still read what the task's work keeps
// valid until then. ending: End settles, and clears statePending itself
// with the stateEnded it sets. Nothing reads the class of a task that
// has ended (the snapshots drop a task that ends while they read it, and
// the application reads it through moirai.From, which learns it), so End
// runs the Resolver only for the one thing it does with the class: the
// penalty a penalized task leaves to the next of its class.
func (t *Task) settle(own, ending bool) {
	var p *Pending
	for {
		p = t.pend.Load()
		if p == nil || p == &resolving {
			for t.state.Load()&statePending != 0 {
				runtime.Gosched() // another goroutine resolves the task
			}
			return
		}
		if t.pend.CompareAndSwap(p, &resolving) {
			break
		}
	}
	if ending && t.state.Load()&statePenalized == 0 {
		return
	}
	if sp := p.R.Resolve(&t.spec, own); sp != nil {
		t.refined.CompareAndSwap(nil, sp)
	}
	if ending {
		return
	}
	t.state.And(^uint32(statePending))
	if d := t.reg.carry.take(t.specRef().Class, t.reg.clock.Now()); d > 0 {
		t.penalize(d)
	}
}

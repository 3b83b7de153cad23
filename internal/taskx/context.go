package taskx

import (
	"context"
	"time"
	"unsafe"
)

// ctxKey is the context key under which a task travels.
type ctxKey struct{}

// taskCtx is the context Begin returns. It answers the task key itself, so
// that [FromContext] on the task's own context costs one comparison, and it
// creates the cancellable context it stands for lazily, on first use (see
// Task.cancelCtx): a task whose context nobody waits on costs no
// context.WithCancelCause at all.
type taskCtx struct {
	parent context.Context
}

// taskCtxOffset is where a Task keeps its taskCtx. A taskCtx exists only
// inside a Task, so the task is found from the context by subtracting it:
// this keeps a pointer out of every Task.
const taskCtxOffset = unsafe.Offsetof(Task{}.ctx)

func (c *taskCtx) task() *Task { return (*Task)(unsafe.Add(unsafe.Pointer(c), -int(taskCtxOffset))) }

func (c *taskCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *taskCtx) Done() <-chan struct{} { return c.task().cancelCtx().ctx.Done() }

func (c *taskCtx) Err() error {
	t := c.task()
	if t.lazy.Load() == nil && t.state.Load()&(stateEnded|stateCancelled) == 0 {
		return c.parent.Err()
	}
	return t.cancelCtx().ctx.Err()
}

func (c *taskCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return c.task()
	}
	if _, ok := key.(*int); ok {
		// The context package finds a context's canceller, for
		// context.Cause and for propagating cancellation to children,
		// under a key of type *int. Hand it the real one.
		return c.task().cancelCtx().ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *taskCtx) String() string { return "moirai.task" }

// cancelPair is a task's cancellable context, once created.
type cancelPair struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// cancelCtx returns the task's cancellable context, creating it on first
// use. A context created after the task was cancelled or ended is
// cancelled at once, so the task's context is done exactly when its parent
// is done, the controller cancelled it, or End was called.
func (t *Task) cancelCtx() *cancelPair {
	if p := t.lazy.Load(); p != nil {
		return p
	}
	ctx, cancel := context.WithCancelCause(t.ctx.parent)
	p := &cancelPair{ctx: ctx, cancel: cancel}
	if !t.lazy.CompareAndSwap(nil, p) {
		cancel(nil)
		p = t.lazy.Load()
	}
	// Cancel and End set their state bit before they look for a context;
	// this looks at the state after a context is published, so one of the
	// two always sees the other. Every caller applies it, the one whose
	// context lost the race too: the winner may not have done so yet.
	switch s := t.state.Load(); {
	case s&stateCancelled != 0:
		p.cancel(t.cause())
	case s&stateEnded != 0:
		p.cancel(nil)
	}
	return p
}

// FromContext returns the task ctx carries, or nil. It panics on a nil
// context, as the standard library does.
func FromContext(ctx context.Context) *Task {
	if c, ok := ctx.(*taskCtx); ok {
		return c.task()
	}
	return fromValue(ctx)
}

// fromValue is FromContext for a context that is not a task's own, out of
// line so that FromContext inlines into the primitives' fast paths.
//
//go:noinline
func fromValue(ctx context.Context) *Task {
	if ctx == nil {
		panic("moirai: nil Context")
	}
	t, _ := ctx.Value(ctxKey{}).(*Task)
	return t
}

// NewContext returns a copy of parent that carries t, so that events emitted
// with it are charged to t. Event-driven code in which one goroutine serves
// many tasks uses it to carry the right task into each piece of work
// (pBox's bind); the returned context is cancelled only when parent is,
// not when t is: use [Task.Context] for that.
func NewContext(parent context.Context, t *Task) context.Context {
	if parent == nil {
		panic("task: nil parent context")
	}
	return &boundCtx{Context: parent, t: t}
}

type boundCtx struct {
	context.Context
	t *Task
}

func (c *boundCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return c.t
	}
	return c.Context.Value(key)
}

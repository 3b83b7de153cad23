package task

import "context"

// ctxKey is the context key under which a task travels.
type ctxKey struct{}

// taskCtx is the context Begin returns: the cancellable context of the
// task, answering the task key itself so that [FromContext] on the task's
// own context costs one comparison.
type taskCtx struct {
	context.Context
	t *Task
}

func (c *taskCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return c.t
	}
	return c.Context.Value(key)
}

func (c *taskCtx) String() string { return "moirai.task" }

// FromContext returns the task ctx carries, or nil. It panics on a nil
// context, as the standard library does.
func FromContext(ctx context.Context) *Task {
	if c, ok := ctx.(*taskCtx); ok {
		return c.t
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

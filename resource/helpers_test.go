package resource_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// env is a task registry and a resource registry wired as the controller
// wires them: ended tasks are folded into the resources' totals. Inside a
// synctest bubble it must be made inside the bubble.
type env struct {
	clk   *clock.Clock
	tasks *task.Registry
	res   *resource.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.New()
	res := resource.NewRegistry()
	return &env{
		clk:   clk,
		tasks: taskx.NewRegistry(clk, task.Options{OnEnd: res.Fold, LiveHold: res.LiveHold}),
		res:   res,
	}
}

// begin starts a task that the test ends on cleanup (ending it twice is
// harmless).
func (e *env) begin(t *testing.T, spec task.Spec) (context.Context, *task.Task) {
	t.Helper()
	ctx, tk := e.tasks.Begin(context.Background(), spec)
	t.Cleanup(func() { tk.End(nil) })
	return ctx, tk
}

// register registers a resource or fails the test.
func (e *env) register(t *testing.T, name string, kind resource.Kind, capacity int64) *resource.Resource {
	t.Helper()
	r, err := e.res.Register(name, kind, capacity)
	if err != nil {
		t.Fatalf("Register(%q): %v", name, err)
	}
	return r
}

func (e *env) mutex(t *testing.T, name string) *resource.Mutex {
	t.Helper()
	return resource.NewMutex(e.register(t, name, resource.KindLock, 0), e.clk.Now)
}

// usage returns tk's accounting for r at the clock's current value.
func usage(t *testing.T, tk *task.Task, r *resource.Resource) task.Usage {
	t.Helper()
	u, ok := taskx.UsageOf(tk, r.ID())
	if !ok {
		t.Fatalf("task %d never touched %q", tk.ID(), r.Name())
	}
	return u
}

// errCause is the cause tests cancel contexts with.
var errCause = errors.New("test: cancelled")

// mustPanic runs fn and returns the value it panicked with, failing the
// test if it did not panic.
func mustPanic(t *testing.T, fn func()) (v any) {
	t.Helper()
	defer func() {
		v = recover()
		if v == nil {
			t.Errorf("no panic")
		}
	}()
	fn()
	return nil
}

// goErr runs fn in a goroutine and returns a channel that receives its
// error. While fn blocks, len of the channel is 0.
func goErr(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// semChurn acquires units() units of s for the task in ctx and releases
// them, iters times; one time in nestOneIn (drawn from rng) it also takes
// and releases one more unit with TryAcquire while it holds them. It
// reports any error, naming seed.
func semChurn(t *testing.T, ctx context.Context, s *resource.Semaphore, seed uint64, rng *rand.Rand, iters int, units func() int64, nestOneIn int) {
	for range iters {
		p, err := s.Acquire(ctx, units())
		if err != nil {
			t.Errorf("seed %d: Acquire: %v", seed, err)
			return
		}
		if rng.IntN(nestOneIn) == 0 {
			if q, ok := s.TryAcquire(ctx, 1); ok {
				if err := q.Release(); err != nil {
					t.Errorf("seed %d: nested Release: %v", seed, err)
				}
			}
		}
		if err := p.Release(); err != nil {
			t.Errorf("seed %d: Release: %v", seed, err)
		}
	}
}

package resource_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func newQueue(t *testing.T, e *env, slots, backlog int64) *resource.Queue {
	t.Helper()
	return resource.NewQueue(e.register(t, "workers", resource.KindQueue, slots), slots, backlog)
}

// queueState is what a test compares a queue with.
type queueState struct{ Slots, Running, Waiting, QueueLength int64 }

func queueStateOf(q *resource.Queue) queueState {
	return queueState{q.Slots(), q.Running(), q.Waiting(), q.Resource().QueueLength()}
}

// enter enters q, marking the test failed if it cannot (it may be called
// from any goroutine).
func enter(t *testing.T, q *resource.Queue, ctx context.Context) resource.Permit {
	t.Helper()
	p, err := q.Enter(ctx)
	if err != nil {
		t.Errorf("Enter: %v", err)
	}
	return p
}

func TestQueueDo(t *testing.T) {
	errWork := errors.New("work failed")
	tests := []struct {
		name    string
		fn      func(context.Context) error
		wantErr error
	}{
		{"success", func(context.Context) error { return nil }, nil},
		{"error", func(context.Context) error { return errWork }, errWork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			q := newQueue(t, e, 2, 0)
			ctx, _ := e.begin(t, task.Spec{})
			var inside queueState
			err := q.Do(ctx, func(ctx context.Context) error {
				inside = queueStateOf(q)
				return tt.fn(ctx)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Do = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(queueState{Slots: 2, Running: 1}, inside); diff != "" {
				t.Errorf("inside fn (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(queueState{Slots: 2}, queueStateOf(q)); diff != "" {
				t.Errorf("after Do (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueDoPanic(t *testing.T) {
	e := newEnv(t)
	q := newQueue(t, e, 1, 0)
	ctx, tk := e.begin(t, task.Spec{})
	got := mustPanic(t, func() {
		_ = q.Do(ctx, func(context.Context) error { panic("boom") })
	})
	if got != "boom" {
		t.Errorf("panic value = %v, want boom", got)
	}
	if diff := cmp.Diff(queueState{Slots: 1}, queueStateOf(q)); diff != "" {
		t.Errorf("after the panic (-want +got):\n%s", diff)
	}
	if u := usage(t, tk, q.Resource()); u.Held != 0 {
		t.Errorf("Held after the panic = %d, want 0", u.Held)
	}
	if err := q.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Do after the panic: %v", err)
	}
}

func TestQueueBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := newQueue(t, e, 1, 2)
		bg := context.Background()
		running := enter(t, q, bg)
		queued := make(chan resource.Permit, 2)
		for range 2 {
			go func() { queued <- enter(t, q, bg) }()
		}
		synctest.Wait()
		if diff := cmp.Diff(queueState{Slots: 1, Running: 1, Waiting: 2, QueueLength: 2}, queueStateOf(q)); diff != "" {
			t.Fatalf("with a full line (-want +got):\n%s", diff)
		}
		ctx, tk := e.begin(t, task.Spec{})
		if _, err := q.Enter(ctx); !errors.Is(err, resource.ErrRejected) {
			t.Fatalf("Enter with a full line = %v, want %v", err, resource.ErrRejected)
		}
		if err := q.Do(ctx, func(context.Context) error { t.Error("fn ran"); return nil }); !errors.Is(err, resource.ErrRejected) {
			t.Fatalf("Do with a full line = %v, want %v", err, resource.ErrRejected)
		}
		// A rejection is not a wait.
		if u, ok := taskx.UsageOf(tk, q.Resource().ID()); ok && (u.Waits != 0 || u.Held != 0) {
			t.Errorf("rejected task's usage = %+v, want no wait and nothing held", u)
		}
		if err := running.Release(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := (<-queued).Release(); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(queueState{Slots: 1}, queueStateOf(q)); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
	})
}

func TestQueueEnterCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := newQueue(t, e, 1, 0)
		running := enter(t, q, context.Background())
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Second, errCause)
		defer cancel()
		if _, err := q.Enter(ctx); !errors.Is(err, errCause) {
			t.Errorf("Enter = %v, want %v", err, errCause)
		}
		if diff := cmp.Diff(queueState{Slots: 1, Running: 1}, queueStateOf(q)); diff != "" {
			t.Errorf("after the cancelled Enter (-want +got):\n%s", diff)
		}
		if err := running.Release(); err != nil {
			t.Fatal(err)
		}

		tctx, tk := e.begin(t, task.Spec{Cancellable: true})
		if err := taskx.Cancel(tk, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enter(tctx); !errors.Is(err, task.ErrCancelled) {
			t.Errorf("Enter of a cancelled task = %v, want an error wrapping %v", err, task.ErrCancelled)
		}
		if diff := cmp.Diff(queueState{Slots: 1}, queueStateOf(q)); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
	})
}

// TestQueueAccounting checks that time in the line is a wait on the queue
// and time in a slot a hold.
func TestQueueAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := newQueue(t, e, 1, 0)
		id := q.Resource().ID()
		actx, a := e.begin(t, task.Spec{})
		bctx, b := e.begin(t, task.Spec{})
		work := func(d time.Duration) func(context.Context) error {
			return func(context.Context) error {
				time.Sleep(d)
				e.clk.Advance()
				return nil
			}
		}
		adone := goErr(func() error { return q.Do(actx, work(7*time.Millisecond)) })
		synctest.Wait()
		bdone := goErr(func() error { return q.Do(bctx, work(2*time.Millisecond)) })
		for _, ch := range []<-chan error{adone, bdone} {
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name string
			tk   *task.Task
			want task.Usage
		}{
			{"first", a, task.Usage{Resource: id, Hold: 7 * time.Millisecond}},
			{"second", b, task.Usage{Resource: id, Hold: 2 * time.Millisecond, Waits: 1, Wait: 7 * time.Millisecond}},
		}
		for _, tt := range tests {
			if diff := cmp.Diff(tt.want, usage(t, tt.tk, q.Resource())); diff != "" {
				t.Errorf("%s: usage (-want +got):\n%s", tt.name, diff)
			}
		}
	})
}

func TestQueueResize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := newQueue(t, e, 1, 0)
		bg := context.Background()
		running := enter(t, q, bg)
		queued := make(chan resource.Permit, 2)
		for range 2 {
			go func() { queued <- enter(t, q, bg) }()
		}
		synctest.Wait()
		if err := q.Resize(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff(queueState{Slots: 3, Running: 3}, queueStateOf(q)); diff != "" {
			t.Errorf("after growing (-want +got):\n%s", diff)
		}
		if err := q.Resize(1); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(queueState{Slots: 1, Running: 3}, queueStateOf(q)); diff != "" {
			t.Errorf("after shrinking (-want +got):\n%s", diff)
		}
		for _, p := range []resource.Permit{running, <-queued, <-queued} {
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
		}
		for _, slots := range []int64{0, -3} {
			if err := q.Resize(slots); err == nil {
				t.Errorf("Resize(%d) succeeded", slots)
			}
		}
		if diff := cmp.Diff(queueState{Slots: 1}, queueStateOf(q)); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
	})
}

package resource_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/resrt"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// A semaphore on the controller's clock names a sole holder of one unit
// in its units word (see resource.Semaphore); these tests are about that
// path, slot_test.go about the holder slots. The other semaphore tests
// use NewSemaphore, which never names one.

var newNamedSemaphore = resrt.NewSemaphore.(func(*resource.Resource, int64, *clock.Clock) *resource.Semaphore)

func namedSemaphore(t *testing.T, e *env, size int64) *resource.Semaphore {
	t.Helper()
	return newNamedSemaphore(e.register(t, "named", resource.KindQueue, size), size, e.clk)
}

// taskTag is the tag a primitive names tk by.
func taskTag(tk *task.Task) uint64 { return taskx.HolderTag(tk.ID()) }

// liveHolds returns the holds in progress s reports now.
func liveHolds(s *resource.Semaphore, e *env) resource.LiveHolds {
	var h resource.LiveHolds
	s.Resource().LiveHolds(e.clk.Now(), &h)
	return h
}

func TestNamedPermitRelease(t *testing.T) {
	for _, others := range []int64{0, 2} {
		t.Run(fmt.Sprintf("others %d", others), func(t *testing.T) {
			e := newEnv(t)
			s := namedSemaphore(t, e, 4)
			ctx, tk := e.begin(t, task.Spec{})
			p := acquire(t, s, ctx, 1) // named: the semaphore was empty
			if _, ok := s.Resource().LiveHold(taskTag(tk), e.clk.Now()); !ok {
				t.Error("LiveHold: the holder is not named")
			}
			for range others {
				octx, _ := e.begin(t, task.Spec{})
				acquire(t, s, octx, 1)
			}
			if got := usage(t, tk, s.Resource()).Held; got != 1 {
				t.Errorf("Held = %d, want 1", got)
			}
			if err := p.Release(); err != nil {
				t.Fatalf("first Release: %v", err)
			}
			if err := p.Release(); err == nil {
				t.Error("second Release succeeded")
			}
			if diff := cmp.Diff(semState{Size: 4, InUse: others, Misuse: 1}, stateOf(s)); diff != "" {
				t.Errorf("after releasing twice (-want +got):\n%s", diff)
			}
			if got := usage(t, tk, s.Resource()).Held; got != 0 {
				t.Errorf("Held = %d, want 0", got)
			}
		})
	}
}

// TestNamedHold: a named hold is in the holder's usage while it lasts
// and after; a second unit taken by the holder moves its named unit to its
// accounting without counting the time twice.
func TestNamedHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 4)
		ctx, tk := e.begin(t, task.Spec{})
		sleep := func(d time.Duration) { time.Sleep(d); e.clk.Advance() }

		p := acquire(t, s, ctx, 1)
		sleep(5 * time.Millisecond)
		if diff := cmp.Diff(task.Usage{Resource: s.Resource().ID(), Held: 1, Hold: 5 * time.Millisecond}, usage(t, tk, s.Resource())); diff != "" {
			t.Errorf("during the named hold (-want +got):\n%s", diff)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(task.Usage{Resource: s.Resource().ID(), Hold: 5 * time.Millisecond}, usage(t, tk, s.Resource())); diff != "" {
			t.Errorf("after the named hold (-want +got):\n%s", diff)
		}

		p = acquire(t, s, ctx, 1) // named again
		sleep(2 * time.Millisecond)
		q := acquire(t, s, ctx, 2) // the named unit joins the task's accounting
		if h := liveHolds(s, e); h.N != 0 {
			t.Errorf("LiveHolds: %d holders still named after the second acquisition", h.N)
		}
		sleep(3 * time.Millisecond)
		if diff := cmp.Diff(task.Usage{Resource: s.Resource().ID(), Held: 3, Hold: 10 * time.Millisecond}, usage(t, tk, s.Resource())); diff != "" {
			t.Errorf("holding both (-want +got):\n%s", diff)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if err := q.Release(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(task.Usage{Resource: s.Resource().ID(), Hold: 10 * time.Millisecond}, usage(t, tk, s.Resource())); diff != "" {
			t.Errorf("after both (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(semState{Size: 4}, stateOf(s)); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
	})
}

// TestNamedResizeBeyondWord: while a holder is named, at most 255 units
// are in use; a semaphore resized beyond that admits the rest once the
// named unit is released.
func TestNamedResizeBeyondWord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 4)
		ctx, _ := e.begin(t, task.Spec{})
		p := acquire(t, s, ctx, 1)
		if err := s.Resize(1000); err != nil {
			t.Fatal(err)
		}
		octx, otk := e.begin(t, task.Spec{})
		var q resource.Permit
		done := make(chan struct{})
		go func() { q = acquire(t, s, octx, 500); close(done) }()
		synctest.Wait()
		if got := s.Waiting(); got != 1 {
			t.Fatalf("Waiting = %d, want 1 while a holder is named", got)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		<-done
		if got := s.InUse(); got != 500 {
			t.Errorf("InUse = %d, want 500", got)
		}
		if got := usage(t, otk, s.Resource()).Held; got != 500 {
			t.Errorf("Held = %d, want 500", got)
		}
		if err := q.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNamedConcurrent: tasks of several goroutines take and release one or
// two units at random, nested or not, on a small semaphore; at the end
// nothing is in use, nothing was refused, and no task holds a unit.
func TestNamedConcurrent(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	e := newEnv(t)
	s := namedSemaphore(t, e, 3)
	var wg sync.WaitGroup
	tasks := make([]*task.Task, 4)
	for i := range tasks {
		ctx, tk := e.begin(t, task.Spec{})
		tasks[i] = tk
		for g := range 2 {
			rng := rand.New(rand.NewPCG(seed, uint64(2*i+g)))
			wg.Go(func() {
				semChurn(t, ctx, s, seed, rng, 300, func() int64 { return 1 + rng.Int64N(2) }, 3)
			})
		}
	}
	wg.Wait()
	if diff := cmp.Diff(semState{Size: 3}, stateOf(s)); diff != "" {
		t.Errorf("seed %d: state (-want +got):\n%s", seed, diff)
	}
	for _, tk := range tasks {
		if got := usage(t, tk, s.Resource()).Held; got != 0 {
			t.Errorf("seed %d: task %d Held = %d, want 0", seed, tk.ID(), got)
		}
	}
}

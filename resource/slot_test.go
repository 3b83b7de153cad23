package resource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// A semaphore on the controller's clock names a task taking one unit
// while another holder is named in its units word in one of its holder
// slots (see resource.Semaphore); these tests are about that path.

// TestSlotNamed: the second holder is named in a slot, reported by
// LiveHolds beside the first, charged its hold after the release, and a
// second release of its permit is refused.
func TestSlotNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 2)
		actx, a := e.begin(t, task.Spec{})
		bctx, b := e.begin(t, task.Spec{})
		sleep := func(d time.Duration) { time.Sleep(d); e.clk.Advance() }

		p := acquire(t, s, actx, 1) // named in the units word
		sleep(time.Millisecond)
		q := acquire(t, s, bctx, 1) // named in b's slot
		h := liveHolds(s, e)
		tags := slices.Sorted(slices.Values(h.Tag[:h.N]))
		if want := []uint64{taskTag(a), taskTag(b)}; !cmp.Equal(tags, want) {
			t.Errorf("LiveHolds tags = %v, want %v", tags, want)
		}
		sleep(3 * time.Millisecond)
		r := s.Resource().ID()
		if diff := cmp.Diff(task.Usage{Resource: r, Held: 1, Hold: 3 * time.Millisecond}, usage(t, b, s.Resource())); diff != "" {
			t.Errorf("b during its hold (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(task.Usage{Resource: r, Held: 1, Hold: 4 * time.Millisecond}, usage(t, a, s.Resource())); diff != "" {
			t.Errorf("a during its hold (-want +got):\n%s", diff)
		}
		if err := q.Release(); err != nil {
			t.Fatal(err)
		}
		if err := q.Release(); err == nil {
			t.Error("second Release of the slot's permit succeeded")
		}
		if diff := cmp.Diff(task.Usage{Resource: r, Hold: 3 * time.Millisecond}, usage(t, b, s.Resource())); diff != "" {
			t.Errorf("b after its hold (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(semState{Size: 2, InUse: 1, Misuse: 1}, stateOf(s)); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if h := liveHolds(s, e); h.N != 0 {
			t.Errorf("LiveHolds.N = %d after both releases", h.N)
		}
	})
}

// TestSlotMoves: a task named in a slot that takes more units, or that
// already held units in its accounting, has its named unit moved there,
// its time counted once.
func TestSlotMoves(t *testing.T) {
	for _, first := range []string{"slot", "accounted"} {
		t.Run(first+" first", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				s := namedSemaphore(t, e, 4)
				octx, _ := e.begin(t, task.Spec{})
				ctx, tk := e.begin(t, task.Spec{})
				sleep := func(d time.Duration) { time.Sleep(d); e.clk.Advance() }

				o := acquire(t, s, octx, 1) // named in the word
				var p, q resource.Permit
				if first == "slot" {
					p = acquire(t, s, ctx, 1) // named in tk's slot
					if _, ok := s.Resource().LiveHold(taskTag(tk), e.clk.Now()); !ok {
						t.Fatal("the second holder is not named")
					}
					sleep(2 * time.Millisecond)
					q = acquire(t, s, ctx, 2)
				} else {
					q = acquire(t, s, ctx, 2)
					sleep(2 * time.Millisecond)
					p = acquire(t, s, ctx, 1)
				}
				if _, ok := s.Resource().LiveHold(taskTag(tk), e.clk.Now()); ok {
					t.Error("the task is still named while it holds units in its accounting")
				}
				sleep(3 * time.Millisecond)
				want := task.Usage{Resource: s.Resource().ID(), Held: 3, Hold: 5 * time.Millisecond}
				if diff := cmp.Diff(want, usage(t, tk, s.Resource())); diff != "" {
					t.Errorf("holding both (-want +got):\n%s", diff)
				}
				for _, x := range []resource.Permit{p, q, o} {
					if err := x.Release(); err != nil {
						t.Fatal(err)
					}
				}
				want.Held = 0
				if diff := cmp.Diff(want, usage(t, tk, s.Resource())); diff != "" {
					t.Errorf("after both (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(semState{Size: 4}, stateOf(s)); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestSlotKept: a holder slot keeps its unit after the release while
// nobody waits, out of InUse and LiveHolds; the slot's next holder takes
// it; an acquisition that does not fit otherwise, a waiter and a resize
// take it back.
func TestSlotKept(t *testing.T) {
	// kept leaves s with one unit held by a (named in the word) and one
	// kept in b's slot, b's permit released.
	kept := func(t *testing.T, e *env, s *resource.Semaphore) (a, b *task.Task, actx, bctx context.Context, pa resource.Permit) {
		t.Helper()
		actx, a = e.begin(t, task.Spec{})
		bctx, b = e.begin(t, task.Spec{})
		pa = acquire(t, s, actx, 1)
		if err := acquire(t, s, bctx, 1).Release(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(semState{Size: s.Size(), InUse: 1}, stateOf(s)); diff != "" {
			t.Fatalf("with a unit kept (-want +got):\n%s", diff)
		}
		if h := liveHolds(s, e); h.N != 1 || h.Tag[0] != taskTag(a) {
			t.Fatalf("LiveHolds = %+v, want a alone", h)
		}
		return a, b, actx, bctx, pa
	}
	t.Run("taken by the slot's next holder", func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 2)
		_, b, _, bctx, _ := kept(t, e, s)
		p := acquire(t, s, bctx, 1)
		if _, ok := s.Resource().LiveHold(taskTag(b), e.clk.Now()); !ok {
			t.Error("b is not named after taking the kept unit")
		}
		if got := s.InUse(); got != 2 {
			t.Errorf("InUse = %d, want 2", got)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if err := p.Release(); err == nil {
			t.Error("second Release of a kept unit's permit succeeded")
		}
	})
	t.Run("taken back for a request that does not fit otherwise", func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 3)
		kept(t, e, s)
		ctx, c := e.begin(t, task.Spec{})
		p, ok := s.TryAcquire(ctx, 2)
		if !ok {
			t.Fatal("TryAcquire(2) failed with 1 of 3 units in use")
		}
		if got := usage(t, c, s.Resource()).Held; got != 2 {
			t.Errorf("Held = %d, want 2", got)
		}
		if diff := cmp.Diff(semState{Size: 3, InUse: 3}, stateOf(s)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("given to a waiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := namedSemaphore(t, e, 2)
			_, _, _, _, pa := kept(t, e, s)
			ctx, _ := e.begin(t, task.Spec{})
			got := goErr(func() error {
				p, err := s.Acquire(ctx, 2)
				if err == nil {
					err = p.Release()
				}
				return err
			})
			synctest.Wait()
			if s.Waiting() != 1 {
				t.Fatalf("Waiting = %d, want 1", s.Waiting())
			}
			if err := pa.Release(); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			if diff := cmp.Diff(semState{Size: 2}, stateOf(s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	})
	t.Run("not kept while a waiter waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := namedSemaphore(t, e, 2)
			actx, _ := e.begin(t, task.Spec{})
			bctx, _ := e.begin(t, task.Spec{})
			pa := acquire(t, s, actx, 1)
			pb := acquire(t, s, bctx, 1) // named in b's slot
			ctx, _ := e.begin(t, task.Spec{})
			got := goErr(func() error {
				p, err := s.Acquire(ctx, 1)
				if err == nil {
					err = p.Release()
				}
				return err
			})
			synctest.Wait()
			if err := pb.Release(); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			if err := pa.Release(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("taken back by a resize", func(t *testing.T) {
		e := newEnv(t)
		s := namedSemaphore(t, e, 2)
		_, _, _, bctx, pa := kept(t, e, s)
		if err := s.Resize(1); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.TryAcquire(bctx, 1); ok {
			t.Error("TryAcquire succeeded with 1 of 1 unit in use")
		}
		if err := pa.Release(); err != nil {
			t.Fatal(err)
		}
		p, ok := s.TryAcquire(bctx, 1)
		if !ok {
			t.Fatal("TryAcquire failed on an empty semaphore")
		}
		if diff := cmp.Diff(semState{Size: 1, InUse: 1}, stateOf(s)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSlotModel runs seeded sequences of acquisitions (one or two units,
// waiting or not), releases, second releases and clock steps by several
// tasks, some of which share a holder slot, on semaphores of a few
// units, and compares after every step the units in use, the refused
// releases, and every task's units held and hold time (its accounting
// with its hold in progress) with a model: a task holds what its permits
// add up to, and its hold time is the time it held at least one unit.
// A failure names the seed and step; the run replays with that seed.
func TestSlotModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { slotModel(t, seed) })
		})
	}
}

func slotModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5107))
	e := newEnv(t)
	size := 2 + rng.Int64N(4)
	s := namedSemaphore(t, e, size)
	type mtask struct {
		tk      *task.Task
		ctx     context.Context
		held    int64
		hold    time.Duration
		since   time.Time
		permits []resource.Permit
		dead    []resource.Permit // released, held nothing since
	}
	ts := make([]*mtask, 3+rng.IntN(6))
	for i := range ts {
		ctx, tk := e.begin(t, task.Spec{})
		ts[i] = &mtask{tk: tk, ctx: ctx}
	}
	take := func(m *mtask, n int64, try bool) (resource.Permit, bool) {
		if try {
			return s.TryAcquire(m.ctx, n)
		}
		p, err := s.Acquire(m.ctx, n)
		return p, err == nil
	}
	var inUse, misuse int64
	for step := range 300 {
		m := ts[rng.IntN(len(ts))]
		var op string
		switch k := rng.IntN(10); {
		case k < 4: // acquire, only when the units are free: nobody waits
			n := 1 + rng.Int64N(2)
			if k == 3 {
				n = 1
			}
			op = fmt.Sprintf("task %d acquires %d (try %v)", m.tk.ID(), n, k == 2)
			if inUse+n > size {
				continue
			}
			p, ok := take(m, n, k == 2)
			if !ok {
				t.Fatalf("seed %d step %d: %s: refused with %d of %d in use", seed, step, op, inUse, size)
			}
			if m.held == 0 {
				m.since = time.Now()
			}
			m.held += n
			inUse += n
			m.permits = append(m.permits, p)
			m.dead = m.dead[:0]
		case k < 7: // release
			if len(m.permits) == 0 {
				continue
			}
			i := rng.IntN(len(m.permits))
			p := m.permits[i]
			op = fmt.Sprintf("task %d releases %d", m.tk.ID(), p.Units())
			if err := p.Release(); err != nil {
				t.Fatalf("seed %d step %d: %s: %v", seed, step, op, err)
			}
			m.permits = slices.Delete(m.permits, i, i+1)
			m.held -= p.Units()
			inUse -= p.Units()
			if m.held == 0 {
				m.hold += time.Since(m.since)
			}
			m.dead = append(m.dead, p)
		case k < 8: // a second release, while the task holds nothing
			if m.held != 0 || len(m.dead) == 0 {
				continue
			}
			p := m.dead[rng.IntN(len(m.dead))]
			op = fmt.Sprintf("task %d releases %d again", m.tk.ID(), p.Units())
			if err := p.Release(); err == nil {
				t.Fatalf("seed %d step %d: %s: succeeded", seed, step, op)
			}
			misuse++
		default:
			d := time.Duration(1+rng.IntN(3)) * time.Millisecond
			op = fmt.Sprintf("clock +%v", d)
			time.Sleep(d)
			e.clk.Advance()
		}
		if diff := cmp.Diff(semState{Size: size, InUse: inUse, Misuse: misuse}, stateOf(s)); diff != "" {
			t.Fatalf("seed %d step %d: after %s: state (-want +got):\n%s", seed, step, op, diff)
		}
		h := liveHolds(s, e)
		for _, x := range ts {
			want := task.Usage{Resource: s.Resource().ID(), Held: x.held, Hold: x.hold}
			if x.held > 0 {
				want.Hold += time.Since(x.since)
			}
			got, ok := taskx.UsageOf(x.tk, s.Resource().ID())
			if !ok && want == (task.Usage{Resource: want.Resource}) {
				continue // never touched it
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d step %d: after %s: task %d usage (-want +got):\n%s", seed, step, op, x.tk.ID(), diff)
			}
			n := 0
			for _, tag := range h.Tag[:h.N] {
				if tag == taskTag(x.tk) {
					n++
				}
			}
			if n > 1 || n == 1 && x.held != 1 {
				t.Fatalf("seed %d step %d: after %s: task %d holding %d is named %d times", seed, step, op, x.tk.ID(), x.held, n)
			}
		}
	}
	for _, m := range ts {
		for _, p := range m.permits {
			if err := p.Release(); err != nil {
				t.Fatalf("seed %d: final release: %v", seed, err)
			}
		}
	}
	if diff := cmp.Diff(semState{Size: size, Misuse: misuse}, stateOf(s)); diff != "" {
		t.Fatalf("seed %d: final state (-want +got):\n%s", seed, diff)
	}
}

// TestSlotConcurrent: two goroutines of each of several tasks, whose IDs
// fall on every slot, take and release one unit (mostly) or two of a
// semaphore of 2 at random, with a TryAcquire inside at times; at the end
// nothing is in use, nothing was refused, no task holds a unit and
// nobody is named. It runs under -race for the races between naming a
// task in its slot and accounting a unit of the same task, and between a
// slot keeping its unit and a waiter (a lost wakeup hangs it).
func TestSlotConcurrent(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			e := newEnv(t)
			s := namedSemaphore(t, e, 2)
			var wg sync.WaitGroup
			tasks := make([]*task.Task, 6)
			for i := range tasks {
				ctx, tk := e.begin(t, task.Spec{})
				tasks[i] = tk
				for g := range 2 {
					rng := rand.New(rand.NewPCG(seed, uint64(2*i+g)))
					wg.Go(func() {
						semChurn(t, ctx, s, seed, rng, 500, func() int64 {
							if rng.IntN(8) == 0 {
								return 2
							}
							return 1
						}, 4)
					})
				}
			}
			wg.Wait()
			if diff := cmp.Diff(semState{Size: 2}, stateOf(s)); diff != "" {
				t.Errorf("seed %d: state (-want +got):\n%s", seed, diff)
			}
			if h := liveHolds(s, e); h.N != 0 {
				t.Errorf("seed %d: %d holders still named", seed, h.N)
			}
			for _, tk := range tasks {
				if got := usage(t, tk, s.Resource()).Held; got != 0 {
					t.Errorf("seed %d: task %d Held = %d, want 0", seed, tk.ID(), got)
				}
			}
		})
	}
}

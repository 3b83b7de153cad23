package baseline_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/bench/baseline"
)

func TestRPCCoDelScript(t *testing.T) {
	c := baseline.NewRPCCoDel() // target 5 ms, interval 100 ms
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	steps := []struct {
		op        string // a: Admit, s: Started, t: Timeout
		at, delay time.Duration
		want      bool          // Started's result
		timeout   time.Duration // Timeout's result
	}{
		{op: "t", at: 0, timeout: ms(100)},
		{op: "a", at: 0},                                 // the queue was empty
		{op: "a", at: ms(10)},                            // two queued
		{op: "s", at: ms(20), delay: ms(20), want: true}, // one left
		{op: "t", at: ms(99), timeout: ms(100)},          // empty at 0 last: 99 ms ago
		{op: "t", at: ms(100), timeout: ms(5)},           // not empty for 100 ms: overloaded
		{op: "a", at: ms(110)},
		{op: "s", at: ms(111), delay: ms(101), want: false}, // over the interval
		{op: "s", at: ms(116), delay: ms(4), want: true},    // within 5 ms; the queue empties here
		{op: "t", at: ms(116), timeout: ms(100)},
		{op: "a", at: ms(120)},
		{op: "a", at: ms(121)},
		{op: "s", at: ms(219), delay: ms(99), want: true},
		{op: "t", at: ms(220), timeout: ms(5)},
		{op: "s", at: ms(220), delay: ms(99), want: false}, // overloaded: 5 ms only
		{op: "t", at: ms(220), timeout: ms(100)},           // empty again
	}
	for i, s := range steps {
		switch s.op {
		case "a":
			if !c.Admit(s.at) {
				t.Fatalf("step %d: Admit refused", i)
			}
		case "s":
			if got := c.Started(s.at, s.delay); got != s.want {
				t.Fatalf("step %d: Started(%v, %v) = %v, want %v", i, s.at, s.delay, got, s.want)
			}
		case "t":
			if got := c.Timeout(s.at); got != s.timeout {
				t.Fatalf("step %d: Timeout(%v) = %v, want %v", i, s.at, got, s.timeout)
			}
			if got := c.Overloaded(s.at); got != (s.timeout == ms(5)) {
				t.Fatalf("step %d: Overloaded(%v) = %v", i, s.at, got)
			}
		}
	}
	if c.Drops() != 2 {
		t.Errorf("drops %d, want 2", c.Drops())
	}
}

// simResult is what a simulated server did with a seeded Poisson trace.
type simResult struct {
	arrived, served, inTime, rejected int
	maxServedDelay                    time.Duration
	maxOverloadedDelay                time.Duration
}

// simulate offers Poisson arrivals at load × capacity to a server of
// workers slots of service each, run as "Fail at Scale" runs it, in a
// synctest bubble: each request is a goroutine that queues in a LIFOQueue
// switched by an RPCCoDel, for the timeout RPCCoDel gives it at arrival
// (and no longer than its deadline), RPCCoDel checking it as the queue
// hands it a slot, and holds its slot for the service time if let
// through. A request handed a slot holds it for a further wake-up
// latency, drawn from an exponential of mean wake, before it runs (a
// goroutine scheduled late on a loaded machine): in time if it finishes
// by its deadline after that. Requests arriving in the first warm of the
// trace are not counted.
func simulate(t *testing.T, seed uint64, load float64, workers int, service, wake, deadline, span, warm time.Duration) simResult {
	var res simResult
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		clock := func() time.Duration { return time.Since(epoch) }
		c := baseline.NewRPCCoDel()
		q := baseline.NewLIFOQueue(workers, func() bool { return c.Overloaded(clock()) }, baseline.WithDequeueCheck(clock, c.Started))
		rng := rand.New(rand.NewPCG(seed, 7))
		rate := load * float64(workers) / service.Seconds()
		var (
			mu sync.Mutex // guards res
			wg sync.WaitGroup
		)
		for at := time.Duration(0); ; {
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			if at >= span {
				break
			}
			time.Sleep(time.Until(epoch.Add(at)))
			counted := at >= warm
			late := time.Duration(rng.ExpFloat64() * float64(wake))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				defer cancel()
				arrived := clock()
				c.Admit(arrived)
				timeout := c.Timeout(arrived)
				qctx, qcancel := context.WithTimeout(ctx, timeout)
				err := q.Enter(qctx)
				qcancel()
				now := clock()
				ok := err == nil
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, baseline.ErrRejected) {
					t.Errorf("Enter: %v", err)
				}
				if ok {
					time.Sleep(late)
				}
				if counted {
					mu.Lock()
					res.arrived++
					if ok {
						res.served++
						if now+late-arrived <= deadline-service {
							res.inTime++
						}
						res.maxServedDelay = max(res.maxServedDelay, now-arrived)
						if timeout < baseline.DefaultRPCCoDelInterval {
							res.maxOverloadedDelay = max(res.maxOverloadedDelay, now-arrived)
						}
					} else {
						res.rejected++
					}
					mu.Unlock()
				}
				if ok {
					time.Sleep(service)
					_ = q.Release()
				}
			})
		}
		wg.Wait()
	})
	return res
}

// TestRPCCoDelTraces checks CoDel with adaptive LIFO on generated Poisson
// traces against what "Fail at Scale" reports of it: under a steady
// overload the server keeps serving at its capacity, no request it serves
// having queued longer than the interval (nor longer than the target if it
// came while the server was overloaded), so that nearly every one meets
// a deadline far longer than the interval; under light load it rejects
// nothing. With late wake-ups (mean 2 × the target), a slot is held
// service + wake-up per request, so the bound is that capacity; a check
// made by the request once running, rather than at the dequeue, rejected
// most requests handed a slot there.
func TestRPCCoDelTraces(t *testing.T) {
	const (
		workers  = 20
		service  = 20 * time.Millisecond
		deadline = 500 * time.Millisecond
		span     = 3 * time.Second
		warm     = time.Second
	)
	for _, wake := range []time.Duration{0, 2 * baseline.DefaultRPCCoDelTarget} {
		capacity := float64(workers) / (service + wake).Seconds() * (span - warm).Seconds()
		for _, seed := range []uint64{1, 2, 3} {
			for _, load := range []float64{0.5, 2, 4} {
				r := simulate(t, seed, load, workers, service, wake, deadline, span, warm)
				optimum := min(float64(r.arrived), capacity)
				t.Logf("wake %v, seed %d, load %g: %d arrived, %d served (%d in time, optimum %.0f), %d rejected, longest served wait %v (%v arriving overloaded)",
					wake, seed, load, r.arrived, r.served, r.inTime, optimum, r.rejected, r.maxServedDelay, r.maxOverloadedDelay)
				if r.maxServedDelay > baseline.DefaultRPCCoDelInterval || r.maxOverloadedDelay > baseline.DefaultRPCCoDelTarget {
					t.Errorf("wake %v, seed %d, load %g: served after waiting %v (%v arriving overloaded)", wake, seed, load, r.maxServedDelay, r.maxOverloadedDelay)
				}
				if load < 1 {
					if wake == 0 && r.rejected > 0 {
						t.Errorf("seed %d, load %g: %d rejected under light load", seed, load, r.rejected)
					}
					continue
				}
				if float64(r.inTime) < 0.95*optimum {
					t.Errorf("wake %v, seed %d, load %g: %d served in time, below 0.95 of the optimum %.0f", wake, seed, load, r.inTime, optimum)
				}
			}
		}
	}
}

// TestLIFOQueueOrder checks the order the queue hands out slots in, FIFO
// or LIFO as its switch says, and that a request giving up leaves the
// queue.
func TestLIFOQueueOrder(t *testing.T) {
	for _, lifo := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			q := baseline.NewLIFOQueue(1, func() bool { return lifo })
			if err := q.Enter(t.Context()); err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				order []int
				wg    sync.WaitGroup
			)
			ctx, cancel := context.WithCancel(t.Context())
			for i := range 4 {
				c := t.Context()
				if i == 2 {
					c = ctx // gives up before its turn
				}
				wg.Go(func() {
					if err := q.Enter(c); err != nil {
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					_ = q.Release()
				})
				synctest.Wait() // queued in the order of i
			}
			cancel()
			synctest.Wait()
			if q.Waiting() != 3 {
				t.Fatalf("%d waiting after one gave up, want 3", q.Waiting())
			}
			_ = q.Release()
			wg.Wait()
			want := []int{0, 1, 3}
			if lifo {
				want = []int{3, 1, 0}
			}
			if !slices.Equal(order, want) {
				t.Errorf("lifo %v: served %v, want %v", lifo, order, want)
			}
			if err := q.Release(); err == nil {
				t.Error("Release with no slot held: no error")
			}
		})
	}
}

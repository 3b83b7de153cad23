package fence_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/moirai-go/moirai/fence"
)

// TestCancelRacingAGrantPassesThePermitOn: a waiter whose context ends
// just as a release grants it the permit (both before it runs again)
// either takes the permit or passes it on; it never keeps it unreleased.
// Which of the two its select sees first is the runtime's random choice,
// so 200 rounds meet the hand-off about 100 times; each round ends with
// nothing in use. Without the hand-off the first such round leaves the
// permit in use for good, and a later Acquire would wait for ever: the
// test checks InUse instead, so it fails at once rather than hanging.
func TestCancelRacingAGrantPassesThePermitOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 2, []fence.Reservation{{"d1", 1}})
		local, _ := f.Acquire(context.Background(), f.Local()) // nothing to borrow
		for _, p := range []*fence.Path{f.Path("d1")} {
			handedOn := 0
			for round := range 200 {
				held, err := f.Acquire(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				type res struct {
					pm  fence.Permit
					err error
				}
				done := make(chan res, 1)
				go func() {
					pm, err := f.Acquire(ctx, p)
					done <- res{pm, err}
				}()
				synctest.Wait() // the waiter waits
				cancel()
				held.Release() // grants the waiter, before it wakes
				r := <-done
				if r.err == nil {
					r.pm.Release()
				} else {
					handedOn++
				}
				synctest.Wait()
				if n := p.InUse(); n != 0 {
					t.Fatalf("%s, round %d: %d permits in use after the waiter gave up (err %v)", p.Name(), round, n, r.err)
				}
			}
			if handedOn == 0 {
				t.Errorf("%s: the waiter never gave up in 200 rounds: the hand-off was not exercised", p.Name())
			}
		}
		local.Release()
		checkIdle(t, f)
	})
}

package cpu

import (
	"testing"
	"testing/synctest"
)

// TestPoolReadErrorsKeepTheLastSizing: with three of four CPUs' worth of
// share, the pool runs three workers; failed reads after that are counted
// and change nothing (TestPoolReadErrors' last sizing is one worker, which
// a pool falling back to one worker would also show).
func TestPoolReadErrorsKeepTheLastSizing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{steps: []scriptStep{{d: ticks(3, 4)}, {d: ticks(3, 4)}, {err: true}, {err: true}, {err: true}}}
		p, err := NewPool(WithBudget(4), WithReader(r), WithTick(tick), WithWindow(1), noPark)
		if err != nil {
			t.Fatal(err)
		}
		settle(2)
		before := p.Stats()
		settle(3)
		st := p.Stats()
		p.Close()
		if before.Active < 2 || st.Active != before.Active || st.ReadErrors != 3 || st.Changes != before.Changes {
			t.Errorf("before the errors %+v, after %+v: want the same sizing (more than one worker) kept, 3 read errors", before, st)
		}
	})
}

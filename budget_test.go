package moirai_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
)

// maintenanceUnderLoad runs, in a synctest bubble, readers of a
// reader/writer lock at 300/s (each holding it 1 ms) for the whole of
// run, and, at 20 s, a maintenance task holding the write lock for hold,
// through Retry with maxWait. It returns the readers' latencies by
// arrival, when the maintenance ended and its error.
func maintenanceUnderLoad(t *testing.T, ctl *moirai.Controller, hold, run, maxWait time.Duration) (lat []time.Duration, ended time.Duration, merr error) {
	t.Helper()
	table := ctl.RWMutex("table")
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(20 * time.Second)
		merr = moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "POST /compact", Cancellable: true},
			func(ctx context.Context) error {
				if err := table.Lock(ctx); err != nil {
					return err
				}
				defer table.Unlock()
				select {
				case <-time.After(hold):
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}, moirai.RetryMaxWait(maxWait))
		ended = time.Since(start)
	})
	n := int(run / (time.Second / 300))
	lat = make([]time.Duration, n)
	for i := range n {
		time.Sleep(time.Second / 300)
		wg.Go(func() {
			began := time.Now()
			ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "GET /item", Cancellable: true})
			err := table.RLock(ctx)
			if err == nil {
				time.Sleep(time.Millisecond)
				table.RUnlock(ctx)
			}
			task.End(err)
			lat[i] = time.Since(began)
		})
	}
	wg.Wait()
	return lat, ended, merr
}

func p99(lat []time.Duration) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// A 1.2 s compaction under a read load that never ends, at an objective
// of p99 50 ms over 5 minutes: its first run is cancelled (readers queue
// behind it), and it cannot fit the load, which never leaves the lock
// unused; its harm (about 345 readers delayed) fits the window's error
// budget (900 misses, 450 of them for maintenance), so it runs, within
// the window, and the window's p99 stays within the objective.
func TestMaintenanceRunsOnTheErrorBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithSLOWindow(5*time.Minute))
		defer ctl.Close()
		lat, ended, err := maintenanceUnderLoad(t, ctl, 1200*time.Millisecond, 5*time.Minute, 2*time.Minute)
		st := ctl.RetryStats()
		t.Logf("maintenance ended at %v (%v); readers' p99 over the window %v; retry stats %+v", ended, err, p99(lat), st)
		if err != nil {
			t.Fatalf("maintenance: %v; want it run", err)
		}
		if st.Cancelled != 1 || st.Budgeted != 1 {
			t.Errorf("retry stats %+v: want its first run cancelled and its re-execution admitted on the budget", st)
		}
		if ended > 5*time.Minute {
			t.Errorf("maintenance ended at %v; want within the window", ended)
		}
		if got := p99(lat); got > 50*time.Millisecond {
			t.Errorf("readers' p99 over the window %v; want ≤ 50ms", got)
		}
	})
}

// A 20 s hold under the same load delays about 6,000 readers: more than
// a whole window's budget allows. It fails within its maximum wait with
// an error naming the resource, the hold, the budget and what would make
// it fit; it is counted and diagnosed.
func TestMaintenanceThatCanNeverFitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithSLOWindow(5*time.Minute))
		defer ctl.Close()
		_, ended, err := maintenanceUnderLoad(t, ctl, 20*time.Second, 60*time.Second, 30*time.Second)
		t.Logf("maintenance ended at %v: %v; retry stats %+v", ended, err, ctl.RetryStats())
		for _, r := range ctl.Decisions() {
			t.Logf("decision %s %s %s: %.300s", r.Action, r.TaskClass, r.Outcome, r.Reason)
		}
		if !errors.Is(err, moirai.ErrNoWindow) || !errors.Is(err, moirai.ErrDropped) {
			t.Fatalf("maintenance: %v; want it dropped for want of a window", err)
		}
		for _, want := range []string{`"POST /compact"`, "lock table", "more than", "error budget", "p99 over 5m0s", "hold under", "moirai vet", "objective window"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if ended > 20*time.Second+31*time.Second {
			t.Errorf("failed at %v; want within its maximum wait of 30s after its first run", ended)
		}
		if st := ctl.RetryStats(); st.OverBudget != 1 || st.Dropped != 1 {
			t.Errorf("retry stats %+v: want one drop over the budget", st)
		}
		if !slices.ContainsFunc(ctl.Decisions(), func(r policy.Record) bool {
			return r.Action == policy.Diagnose && r.TaskClass == "POST /compact" && strings.Contains(r.Reason, "error budget")
		}) {
			t.Errorf("no diagnosis of the class in %+v", ctl.Decisions())
		}
	})
}

// Two 1.2 s compactions of one table, 10 s apart, under the same
// never-ending read load: the first spends most of the maintenance half
// of the window's budget; the second, its class's hold now known, waits
// until the first's misses leave the window,
// at most as often as the budget allows, and meanwhile its class's
// expected wait (what a cancelled request's Retry-After says) is the
// time until it fits. Every 5-minute window's p99 meets the objective.
func TestMaintenanceAsOftenAsTheBudgetAllows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithSLOWindow(5*time.Minute))
		defer ctl.Close()
		table := ctl.RWMutex("table")
		var wg sync.WaitGroup
		var ended [2]time.Duration
		var errs [2]error
		start := time.Now()
		for k := range 2 {
			wg.Go(func() {
				time.Sleep(time.Duration(20+10*k) * time.Second)
				errs[k] = moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "POST /compact", Key: fmt.Sprint(k), Cancellable: true},
					func(ctx context.Context) error {
						if err := table.Lock(ctx); err != nil {
							return err
						}
						defer table.Unlock()
						select {
						case <-time.After(1200 * time.Millisecond):
							return nil
						case <-ctx.Done():
							return context.Cause(ctx)
						}
					}, moirai.RetryMaxWait(10*time.Minute))
				ended[k] = time.Since(start)
			})
		}
		var waitAt60 time.Duration
		wg.Go(func() {
			time.Sleep(60 * time.Second)
			waitAt60 = ctl.ExpectedWait("POST /compact")
		})
		const run = 7 * time.Minute
		n := int(run / (time.Second / 300))
		lat := make([]time.Duration, n)
		for i := range n {
			time.Sleep(time.Second / 300)
			wg.Go(func() {
				began := time.Now()
				ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "GET /item", Cancellable: true})
				err := table.RLock(ctx)
				if err == nil {
					time.Sleep(time.Millisecond)
					table.RUnlock(ctx)
				}
				task.End(err)
				lat[i] = time.Since(began)
			})
		}
		wg.Wait()
		t.Logf("compactions ended at %v (%v) and %v (%v); expected wait of the second at 60 s: %v; retry stats %+v",
			ended[0], errs[0], ended[1], errs[1], waitAt60, ctl.RetryStats())
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("compactions: %v, %v; want both run", errs[0], errs[1])
		}
		if ended[1] < ended[0]+4*time.Minute {
			t.Errorf("the second ran at %v, %v after the first: want it to wait for the first's misses to leave the window", ended[1], ended[1]-ended[0])
		}
		if waitAt60 < 3*time.Minute || waitAt60 > 5*time.Minute {
			t.Errorf("expected wait of the waiting compaction at 60 s: %v; want the time until it fits the budget, 4–5 minutes", waitAt60)
		}
		per := int(5 * time.Minute / (time.Second / 300))
		for from := 0; from+per <= n; from += per / 5 {
			if got := p99(lat[from : from+per]); got > 50*time.Millisecond {
				t.Errorf("p99 of the window from %v: %v; want ≤ 50ms", time.Duration(from)*(time.Second/300), got)
			}
		}
	})
}

// A compaction whose class is known to hold the lock for 20 s (one ran
// while nothing else did) is cancelled under the read load, and its harm,
// about 6,000 readers, exceeds half a whole window's budget: it waits for
// the load to stop until its maximum wait, then fails with the advice,
// its expected hold named.
func TestMaintenanceKnownTooLongFailsAtMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithSLOWindow(5*time.Minute))
		defer ctl.Close()
		table := ctl.RWMutex("table")
		compact := func() error {
			return moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "POST /compact", Cancellable: true},
				func(ctx context.Context) error {
					if err := table.Lock(ctx); err != nil {
						return err
					}
					defer table.Unlock()
					select {
					case <-time.After(20 * time.Second):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				}, moirai.RetryMaxWait(30*time.Second))
		}
		if err := compact(); err != nil {
			t.Fatalf("alone: %v", err)
		}
		time.Sleep(time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		var err error
		var ended time.Duration
		wg.Go(func() {
			time.Sleep(20 * time.Second)
			err = compact()
			ended = time.Since(start)
		})
		for range 70 * 300 {
			time.Sleep(time.Second / 300)
			wg.Go(func() {
				ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "GET /item", Cancellable: true})
				err := table.RLock(ctx)
				if err == nil {
					time.Sleep(time.Millisecond)
					table.RUnlock(ctx)
				}
				task.End(err)
			})
		}
		wg.Wait()
		t.Logf("ended at %v: %v; %+v", ended, err, ctl.RetryStats())
		if !errors.Is(err, moirai.ErrNoWindow) {
			t.Fatalf("compaction under load: %v; want no window", err)
		}
		for _, want := range []string{"lock table for about 2", "error budget", "hold under", "moirai vet"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if ended < 50*time.Second || ended > 51*time.Second {
			t.Errorf("failed at %v; want at its maximum wait, 30 s after its first run at 20 s", ended)
		}
		if st := ctl.RetryStats(); st.OverBudget != 1 || st.Budgeted != 0 {
			t.Errorf("retry stats %+v: want one drop over the budget and no budgeted run", st)
		}
	})
}

package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollectorReadsController(t *testing.T) {
	ctl := moirai.New()
	defer ctl.Close()
	mu := ctl.Mutex("table:orders")
	ctl.Semaphore("pool:db", 4)
	for i := range 3 {
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "c"})
		if err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		var err error
		if i == 0 {
			err = errors.New("boom")
		}
		tk.End(err)
	}
	_, live := ctl.Begin(context.Background(), moirai.Spec{Class: "c"})
	defer live.End(nil)

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.NewCollector(ctl)); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP moirai_tasks_begun_total Tasks begun.
# TYPE moirai_tasks_begun_total counter
moirai_tasks_begun_total 4
# HELP moirai_tasks_ended_total Tasks ended.
# TYPE moirai_tasks_ended_total counter
moirai_tasks_ended_total 3
# HELP moirai_tasks_failed_total Tasks that ended with an error.
# TYPE moirai_tasks_failed_total counter
moirai_tasks_failed_total 1
# HELP moirai_tasks_live Tasks begun and not ended.
# TYPE moirai_tasks_live gauge
moirai_tasks_live 1
# HELP moirai_resource_resident Units of the resource held now.
# TYPE moirai_resource_resident gauge
moirai_resource_resident{resource="pool:db"} 0
moirai_resource_resident{resource="table:orders"} 0
# HELP moirai_resource_capacity The resource's capacity in units (counted resources only).
# TYPE moirai_resource_capacity gauge
moirai_resource_capacity{resource="pool:db"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"moirai_tasks_begun_total", "moirai_tasks_ended_total", "moirai_tasks_failed_total",
		"moirai_tasks_live", "moirai_resource_resident", "moirai_resource_capacity"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Fatalf("gather: %d metrics, %v", n, err)
	}
}

func ExampleNewCollector() {
	ctl := moirai.New()
	defer ctl.Close()
	reg := prometheus.NewRegistry() // never the global one
	reg.MustRegister(metrics.NewCollector(ctl))
	// Serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
}

func newController(t *testing.T) *moirai.Controller {
	ctl := moirai.New()
	t.Cleanup(func() { ctl.Close() })
	return ctl
}

// BenchmarkScrape is the cost of one scrape (the collector costs nothing
// between scrapes): go test -bench Scrape ./metrics
func BenchmarkScrape(b *testing.B) {
	ctl := moirai.New()
	defer ctl.Close()
	for i := range 20 {
		ctl.Semaphore("pool:"+string(rune('a'+i)), 4)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(ctl))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCollectorCountsRetries: a run the controller cancels and Retry runs
// again shows as cancelled and re-executed.
func TestCollectorCountsRetries(t *testing.T) {
	ctl := moirai.New()
	defer ctl.Close()
	runs := 0
	err := moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "job", Cancellable: true, Kind: moirai.Background},
		func(ctx context.Context) error {
			runs++
			if runs == 1 {
				if err := ctl.Cancel(moirai.From(ctx).ID(), "test"); err != nil {
					return err
				}
				<-ctx.Done()
				return context.Cause(ctx)
			}
			return nil
		}, moirai.RetryQuiet(time.Millisecond))
	if err != nil || runs != 2 {
		t.Fatalf("Retry: %v after %d runs; want success on the second", err, runs)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(ctl))
	want := `
# HELP moirai_retries_total Cancelled runs of moirai.Retry (and the middleware's re-execution), by what became of them: cancelled (all), reexecuted, dropped (objective out of reach or waited too long), interrupted (the caller gave up); budgeted (reexecuted on the objective's error budget, their hold not fitting the load) and over_budget (dropped, their hold never fitting the error budget).
# TYPE moirai_retries_total counter
moirai_retries_total{outcome="budgeted"} 0
moirai_retries_total{outcome="cancelled"} 1
moirai_retries_total{outcome="dropped"} 0
moirai_retries_total{outcome="interrupted"} 0
moirai_retries_total{outcome="over_budget"} 0
moirai_retries_total{outcome="reexecuted"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moirai_retries_total"); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorExportsContentionCounters: the ended tasks' waits and
// execution time, whose rates give a resource's contention level.
func TestCollectorExportsContentionCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		raw, err := ctl.Register("table", moirai.KindLock, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "c"})
		raw.WaitBegin(ctx)
		time.Sleep(100 * time.Millisecond)
		raw.WaitEnd(ctx)
		time.Sleep(100 * time.Millisecond)
		tk.End(nil)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(metrics.NewCollector(ctl))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if c := m.GetCounter(); c != nil {
					got[mf.GetName()] = c.GetValue()
				}
			}
		}
		// 200 ms run, 100 ms of it waiting: a contention of a half, give or
		// take the controller clock's coarse tick.
		exec, wait := got["moirai_tasks_exec_seconds_total"], got["moirai_resource_wait_seconds_total"]
		if got["moirai_resource_waits_total"] != 1 || exec < 0.15 || exec > 0.25 || wait < 0.05 || wait > 0.15 {
			t.Fatalf("counters %v: want one wait of about 0.1 s in 0.2 s of execution", got)
		}
		if _, ok := got["moirai_resource_evictions_total"]; ok {
			t.Error("evictions exported for a lock")
		}
	})
}

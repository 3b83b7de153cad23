package peers

import (
	"context"
	"testing"
	"time"

	sentinel "github.com/alibaba/sentinel-golang/api"
	"github.com/alibaba/sentinel-golang/core/base"
	"github.com/alibaba/sentinel-golang/core/config"
	"github.com/alibaba/sentinel-golang/core/flow"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	gclcore "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gcllimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
	"github.com/moirai-go/moirai/task"
)

// BenchmarkAdmit is the per-call cost of admission: the check at arrival
// and the report when the request starts or ends, as each library's
// middleware would make them. moirai's middleware reads the controller's
// clock (one atomic load while no detector fires) and so do these; the
// peers read the system clock inside.
func BenchmarkAdmit(b *testing.B) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	b.Run("moirai-dagor", func(b *testing.B) {
		d := admit.NewDAGOR()
		p := task.Priority{Business: 3, User: 42}
		b.ReportAllocs()
		for b.Loop() {
			now := ctl.Now()
			if d.AdmitPriority(now, p) {
				d.Started(now, 0)
			}
		}
	})
	b.Run("moirai-codel", func(b *testing.B) {
		c := baseline.NewCoDel()
		b.ReportAllocs()
		for b.Loop() {
			now := ctl.Now()
			if c.Admit(now) && c.Started(now, 0) {
				c.Done(now, 0)
			}
		}
	})
	b.Run("go-concurrency-limits-vegas", func(b *testing.B) {
		l, err := gcllimiter.NewDefaultLimiter(
			gcllimit.NewDefaultVegasLimit("bench", gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance),
			int64(time.Second), int64(10*time.Second), int64(time.Microsecond), 100,
			gclstrategy.NewSimpleStrategy(1000), gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if ln, ok := l.Acquire(ctx); ok {
				ln.OnSuccess()
			}
		}
	})
	b.Run("failsafe-go-adaptivelimiter", func(b *testing.B) {
		l := adaptivelimiter.NewWithDefaults[any]()
		b.ReportAllocs()
		for b.Loop() {
			if p, ok := l.TryAcquirePermit(); ok {
				p.Record()
			}
		}
	})
	b.Run("failsafe-go-prioritylimiter", func(b *testing.B) {
		l := adaptivelimiter.NewBuilder[any]().BuildPrioritized(adaptivelimiter.NewPrioritizer())
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if p, err := l.AcquirePermitWithPriority(ctx, priority.High); err == nil {
				p.Record()
			}
		}
	})
	b.Run("aegis-bbr", func(b *testing.B) {
		l := bbr.NewLimiter()
		b.ReportAllocs()
		for b.Loop() {
			if done, err := l.Allow(); err == nil {
				done(ratelimit.DoneInfo{})
			}
		}
	})
	b.Run("sentinel-golang", func(b *testing.B) {
		conf := config.NewDefaultConfig()
		conf.Sentinel.Log.Logger = nil
		if err := sentinel.InitWithConfig(conf); err != nil {
			b.Fatal(err)
		}
		if _, err := flow.LoadRules([]*flow.Rule{{Resource: "bench", TokenCalculateStrategy: flow.Direct,
			ControlBehavior: flow.Reject, Threshold: 1e12, StatIntervalInMs: 1000}}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if e, blocked := sentinel.Entry("bench", sentinel.WithTrafficType(base.Inbound)); blocked == nil {
				e.Exit()
			}
		}
	})
}

package grpcmw_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/task"
)

// appKey is the application's own context key.
type appKey struct{}

// TestClassIsTheMethodGenerated: on generated servers (random services
// and methods, chains of 1–3 interceptors of the controller with the
// application's own interceptors between them), every call's class is its
// full method, and one task serves it. Replay a failure with its seed.
func TestClassIsTheMethodGenerated(t *testing.T) {
	const servers = 200
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	app := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(context.WithValue(ctx, appKey{}, 1), req)
	}
	calls := 0
	for seed := range uint64(servers) {
		rng := rand.New(rand.NewPCG(seed, 43))
		var chain []grpc.UnaryServerInterceptor
		for i := range 1 + rng.IntN(5) {
			if i == 0 || rng.IntN(2) == 0 {
				chain = append(chain, grpcmw.UnaryServerInterceptor(ctl))
			} else {
				chain = append(chain, app)
			}
		}
		for range 1 + rng.IntN(6) {
			method := fmt.Sprintf("/pkg%d.Svc%d/M%d", rng.IntN(10), rng.IntN(10), rng.IntN(100))
			var got string
			handler := func(ctx context.Context, _ any) (any, error) {
				got = moirai.From(ctx).Spec().Class
				return nil, nil
			}
			for i := len(chain) - 1; i >= 0; i-- {
				next, ic := handler, chain[i]
				handler = func(ctx context.Context, req any) (any, error) {
					return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, next)
				}
			}
			var before, after task.Totals
			ctl.Tasks().TotalsInto(&before)
			if _, err := handler(context.Background(), nil); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			ctl.Tasks().TotalsInto(&after)
			calls++
			if got != method {
				t.Errorf("seed %d, %d interceptors: class %q; want %q", seed, len(chain), got, method)
			}
			if n := after.Begun - before.Begun; n != 1 {
				t.Errorf("seed %d: %d tasks for one call", seed, n)
			}
		}
	}
	t.Logf("%d servers, %d calls", servers, calls)
}

// TestTwoReportsKeepTheOlderGenerated is the pool service of httpmw's
// test of the same name served over gRPC, through generated chains of
// interceptors: a pool of 10, item lookups (3 ms, 200/s) and fan-out
// reports (6 workers, queries of 200 ms, 1.2 s in all); a second report
// starts when the first is half done. Whatever the chain, and whether or
// not every method is one class, the older report completes and the
// newcomer is cancelled (UNAVAILABLE).
func TestTwoReportsKeepTheOlderGenerated(t *testing.T) {
	for seed := range uint64(8) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 4343))
			ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
			defer ctl.Close()
			pool := ctl.Semaphore("db-pool", 10)
			query := func(ctx context.Context, d time.Duration) error {
				p, err := pool.Acquire(ctx, 1)
				if err != nil {
					return err
				}
				defer p.Release()
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			handler := func(ctx context.Context, req any) (any, error) {
				if req == "item" {
					return nil, query(ctx, 3*time.Millisecond)
				}
				const workers, queries = 6, 36
				var mu sync.Mutex
				var next, done int64
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for {
							mu.Lock()
							if next >= queries || ctx.Err() != nil {
								mu.Unlock()
								return
							}
							next++
							mu.Unlock()
							if query(ctx, 200*time.Millisecond) != nil {
								return
							}
							mu.Lock()
							done++
							moirai.From(ctx).Progress(done, queries)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				return nil, context.Cause(ctx)
			}
			// Half the servers merge every method into one class, as a
			// WithClass that ignores the method would: the class is then
			// mixed, and the policy stops trusting its history.
			merged := seed%2 == 1
			var opts []grpcmw.Option
			if merged {
				opts = append(opts, grpcmw.WithClass(func(string) string { return "shop" }))
			}
			var chain []grpc.UnaryServerInterceptor
			for i := range 1 + rng.IntN(4) {
				if i == 0 || rng.IntN(2) == 0 {
					chain = append(chain, grpcmw.UnaryServerInterceptor(ctl, opts...))
				} else {
					chain = append(chain, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
						return h(context.WithValue(ctx, appKey{}, 1), req)
					})
				}
			}
			call := func(method string, req any) error {
				h := grpc.UnaryHandler(handler)
				for i := len(chain) - 1; i >= 0; i-- {
					next, ic := h, chain[i]
					h = func(ctx context.Context, req any) (any, error) {
						return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, next)
					}
				}
				_, err := h(context.Background(), req)
				return err
			}
			var wg sync.WaitGroup
			var errs [2]error
			wg.Go(func() { time.Sleep(200 * time.Millisecond); errs[0] = call("/shop.Reports/Run", "report") })
			wg.Go(func() { time.Sleep(800 * time.Millisecond); errs[1] = call("/shop.Reports/Run", "report") })
			for range 600 {
				time.Sleep(5 * time.Millisecond)
				wg.Go(func() { _ = call("/shop.Items/Get", "item") })
			}
			wg.Wait()
			t.Logf("seed %d, %d interceptors, one class %v: older report %v, newer %v", seed, len(chain), merged, errs[0], status.Code(errs[1]))
			if errs[0] != nil {
				t.Errorf("seed %d: the older report failed: %v; want it kept", seed, errs[0])
			}
			if status.Code(errs[1]) != codes.Unavailable {
				t.Errorf("seed %d: the newer report ended with %v; want it cancelled (UNAVAILABLE)", seed, errs[1])
			}
		})
	}
}

package grpcmw_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc"

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
	ctl := moirai.New(moirai.WithTraceOnly())
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

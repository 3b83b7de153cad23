package grpcmw_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
)

// BenchmarkUnary is what the unary server interceptor adds to a call: a
// parallel call of a handler that reads its context, on a context
// carrying the incoming metadata a gRPC server gives it, made bare
// (baseline: the handler called directly) and through
// grpcmw.UnaryServerInterceptor with its defaults under moirai.New's
// default controller (moirai), with the process's CPU time per call
// (cpu-ns/op), which a shared machine disturbs less than the wall clock.
// Run both in one run and compare: go test
// -run '^$' -bench Unary -count 6 ./grpcmw.
func BenchmarkUnary(b *testing.B) {
	handler := func(ctx context.Context, req any) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return req, nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/shop.Items/Get"}
	md := metadata.Pairs(":authority", "localhost:50051", "content-type", "application/grpc",
		"user-agent", "grpc-go/1.83.2", "grpc-accept-encoding", "gzip")
	ctx := metadata.NewIncomingContext(context.Background(), md)
	for _, bc := range []struct {
		name string
		call func(ctl *moirai.Controller) func(context.Context, any) (any, error)
	}{
		{"baseline", func(*moirai.Controller) func(context.Context, any) (any, error) { return handler }},
		{"moirai", func(ctl *moirai.Controller) func(context.Context, any) (any, error) {
			ic := grpcmw.UnaryServerInterceptor(ctl)
			return func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, handler) }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctl := moirai.New(moirai.WithSLO(0.99, 50e6))
			defer ctl.Close()
			call := bc.call(ctl)
			b.ReportAllocs()
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := call(ctx, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// reportCPU reports the process's CPU time per operation (cpu-ns/op) of
// the benchmark that defers the function it returns.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if used := processCPU() - start; start > 0 && b.N > 0 {
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
		}
	}
}

package dagorsuite

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The suite's two services, declared by hand over protobuf's well-known
// wrapper messages so that the suite needs no generated code.
const (
	methodWork = "/moirai.bench.dagor.M/Work" // M: one unit of work
	methodTask = "/moirai.bench.dagor.A/Task" // A: one task, x calls to M
)

// workFunc serves M's Work: the request names the task, the reply is
// empty (a success).
type workFunc func(ctx context.Context, task string) error

// taskFunc serves A's Task: the request is the number of calls x; the
// reply reports how many calls to M completed and whether all did.
type taskFunc func(ctx context.Context, calls int64) (completed int64, err error)

func workDesc(fn workFunc) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "moirai.bench.dagor.M",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Work",
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					return &wrapperspb.BoolValue{Value: true}, fn(ctx, req.(*wrapperspb.StringValue).GetValue())
				}
				if icpt == nil {
					return h(ctx, in)
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: methodWork}, h)
			},
		}},
	}
}

func taskDesc(fn taskFunc) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "moirai.bench.dagor.A",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Task",
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.Int64Value)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					done, err := fn(ctx, req.(*wrapperspb.Int64Value).GetValue())
					// The count of completed calls travels even with a
					// failure: it is what the wasted work is made of.
					return &wrapperspb.Int64Value{Value: encodeResult(done, err == nil)}, nil
				}
				if icpt == nil {
					return h(ctx, in)
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: methodTask}, h)
			},
		}},
	}
}

// encodeResult packs a task's outcome in one integer: completed calls
// times two, plus one for a success.
func encodeResult(completed int64, ok bool) int64 {
	v := completed * 2
	if ok {
		v++
	}
	return v
}

func decodeResult(v int64) (completed int64, ok bool) { return v / 2, v%2 == 1 }

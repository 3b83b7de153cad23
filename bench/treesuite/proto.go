package treesuite

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The suite's service, declared by hand over protobuf's well-known wrapper
// messages so that the suite needs no generated code: every process serves
// Call (a tree or a sub-request, named by the request: "light:N" or
// "culprit:K") and Stats (its Stats, as JSON).
const (
	methodCall  = "/moirai.bench.tree.S/Call"
	methodStats = "/moirai.bench.tree.S/Stats"
)

type callFunc func(ctx context.Context, req string) error

func serviceDesc(call callFunc, stats func() ([]byte, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "moirai.bench.tree.S",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					if err := call(ctx, req.(*wrapperspb.StringValue).GetValue()); err != nil {
						return nil, err
					}
					return &wrapperspb.BoolValue{Value: true}, nil
				}
				if icpt == nil {
					return h(ctx, in)
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: methodCall}, h)
			},
		}, {
			// Stats bypasses the interceptor: it is the harness's, not a
			// tree's.
			MethodName: "Stats",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(wrapperspb.StringValue)); err != nil {
					return nil, err
				}
				b, err := stats()
				if err != nil {
					return nil, err
				}
				return wrapperspb.String(string(b)), nil
			},
		}},
	}
}

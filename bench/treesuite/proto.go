package treesuite

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The suite's service, declared by hand over protobuf's well-known wrapper
// messages so that the suite needs no generated code: every process serves
// Call (a light tree or its sub-request, named by the request "light:N"),
// Report (a culprit tree or its sub-requests, "culprit:K") and Stats (its
// Stats, as JSON). A culprit tree is a request of its own endpoint, as a
// report is in a real service: its class (the method) is not the light
// trees'.
const (
	methodCall   = "/moirai.bench.tree.S/Call"
	methodReport = "/moirai.bench.tree.S/Report"
	methodStats  = "/moirai.bench.tree.S/Stats"
)

// methodOf is the method a request is sent on.
func methodOf(req string) string {
	if strings.HasPrefix(req, "culprit:") {
		return methodReport
	}
	return methodCall
}

type callFunc func(ctx context.Context, req string) error

func serviceDesc(call callFunc, stats func() ([]byte, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "moirai.bench.tree.S",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Call", Handler: handler(call, methodCall)},
			{MethodName: "Report", Handler: handler(call, methodReport)},
			{
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
			},
		},
	}
}

// handler serves method through the interceptor.
func handler(call callFunc, method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
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
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, h)
	}
}

package otelmoirai_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/otelmoirai"
)

// requestContext stands for a request's context as otelhttp or otelgrpc
// leave it: it carries the request's span (here a remote one, parsed
// from a traceparent).
func requestContext() context.Context {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// The wiring: the controller gets the instrumentation's options, then
// the instrumentation is tied to it. Every decision record carries the
// trace id of the decided task's request.
func ExampleNew() {
	tel := otelmoirai.New() // the global providers
	ctl := moirai.New(append(tel.ControllerOptions(), moirai.WithoutMechanisms())...)
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		fmt.Println(err)
		return
	}
	defer tel.Close()

	_, tk := ctl.Begin(requestContext(), moirai.Spec{Class: "POST /export", Cancellable: true})
	defer tk.End(nil)
	_ = ctl.Cancel(tk.ID(), "operator")
	d := ctl.Decisions()[0]
	fmt.Println(d.Action, d.TaskClass, d.TraceID)
	// Output: cancel POST /export 4bf92f3577b34da6a3ce929d0e0e4736
}

// Track in a gRPC unary interceptor chained after grpcmw's (here called
// by hand): the handler runs on the context Track returns, and the
// finish function records on the request's span what moirai did.
func ExampleTelemetry_Track() {
	tel := otelmoirai.New()
	ctl := moirai.New(append(tel.ControllerOptions(), moirai.WithoutMechanisms())...)
	defer ctl.Close()
	_ = tel.Instrument(ctl)
	defer tel.Close()

	interceptor := func(ctx context.Context, req any, handler func(context.Context, any) (any, error)) (any, error) {
		ctx, finish := tel.Track(ctx)
		defer finish()
		return handler(ctx, req)
	}
	ctx, tk := ctl.Begin(requestContext(), moirai.Spec{Class: "/orders.Orders/Export"}) // grpcmw's task
	defer tk.End(nil)
	resp, err := interceptor(ctx, "req", func(ctx context.Context, req any) (any, error) {
		return fmt.Sprint("served ", req, " as task ", moirai.From(ctx) == tk), nil
	})
	fmt.Println(resp, err)
	// Output: served req as task true <nil>
}

// TraceID is what the controller reads a decided task's trace id with.
func ExampleTraceID() {
	fmt.Printf("%q\n", otelmoirai.TraceID(requestContext()))
	fmt.Printf("%q\n", otelmoirai.TraceID(context.Background()))
	// Output:
	// "4bf92f3577b34da6a3ce929d0e0e4736"
	// ""
}

package test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/codes"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/otelmoirai"
)

// ordersHealth is a gRPC service whose Check of service "report" holds
// the orders lock until its context ends, and of "orders" takes it
// briefly.
type ordersHealth struct {
	healthpb.UnimplementedHealthServer
	orders *moirai.Mutex
	held   chan struct{} // closed once the report holds the lock
}

func (h *ordersHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.orders.Lock(ctx); err != nil {
		return nil, err
	}
	defer h.orders.Unlock()
	if req.Service == "report" {
		close(h.held)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// track is the unary interceptor the package doc shows, chained after
// grpcmw's.
func track(tel *otelmoirai.Telemetry) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, finish := tel.Track(ctx)
		defer finish()
		return h(ctx, req)
	}
}

// TestGRPCCancelledCallSpanCarriesTheDecision: otelgrpc's server span of
// a call grpcmw made a task, and Atropos cancelled, carries the decision;
// the other calls' spans carry nothing of moirai.
func TestGRPCCancelledCallSpanCarriesTheDecision(t *testing.T) {
	s := newSDK()
	defer s.shutdown()
	tel := s.telemetry()
	ctl := newController(tel, moirai.WithDetector(waiting{}), moirai.WithPolicy(cancel.NewAtropos(cancel.MultiObjective)))
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		t.Fatal(err)
	}
	defer tel.Close()

	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.tp), otelgrpc.WithMeterProvider(s.mp))),
		grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithCancellable(true)), track(tel)))
	svc := &ordersHealth{orders: ctl.Mutex("table:orders"), held: make(chan struct{})}
	healthpb.RegisterHealthServer(srv, svc)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()
	cc, err := grpc.NewClient("passthrough:///orders", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx, stop := context.WithTimeout(t.Context(), 30*time.Second)
	defer stop()

	culprit := make(chan error, 1)
	go func() {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "report"})
		culprit <- err
	}()
	select {
	case <-svc.held:
	case err := <-culprit:
		t.Fatalf("the report ended before holding the lock: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"}) })
	}
	if err := <-culprit; err == nil {
		t.Fatal("the report was served; want it cancelled")
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("victim %d: %v", i, err)
		}
	}
	ds := ctl.Decisions()
	if len(ds) != 1 || ds[0].Outcome.String() != "acted" {
		t.Fatalf("decisions: %+v", ds)
	}
	srv.GracefulStop()
	var cancelled, others int
	for _, sp := range s.spans.Ended() {
		if sp.SpanKind().String() != "server" {
			continue
		}
		a := moiraiAttrs(sp.Attributes())
		if a["moirai.action"].AsString() != "cancel" {
			others++
			if len(a) > 0 {
				t.Errorf("victim's span carries %v", a)
			}
			continue
		}
		cancelled++
		if a["moirai.task.id"].AsInt64() != int64(ds[0].Task) || a["moirai.resource"].AsString() != "table:orders" ||
			a["moirai.task.class"].AsString() != "/grpc.health.v1.Health/Check" || a["moirai.reason"].AsString() != ds[0].Reason ||
			sp.Status().Code != codes.Error || sp.SpanContext().TraceID().String() != ds[0].TraceID {
			t.Errorf("cancelled call's span: %v, status %v, trace %s; decision %+v", a, sp.Status(), sp.SpanContext().TraceID(), ds[0])
		}
	}
	if cancelled != 1 || others != 3 {
		t.Errorf("%d cancelled and %d other server spans, want 1 and 3", cancelled, others)
	}
}

// TestGRPCRejectedCallSpanCarriesTheLevel: an interceptor chained before
// grpcmw's records grpcmw's admission rejection, with the admitter's
// level, on otelgrpc's server span.
func TestGRPCRejectedCallSpanCarriesTheLevel(t *testing.T) {
	s := newSDK()
	defer s.shutdown()
	tel := s.telemetry()
	ctl := newController(tel, moirai.WithoutMechanisms())
	defer ctl.Close()
	d := overloaded(t)
	rejecting := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if st, ok := status.FromError(err); ok && st.Code() == grpccodes.ResourceExhausted && st.Message() == "overloaded: call rejected by admission control" {
			tel.Rejected(ctx, admit.FormatLevel(d.Level()))
		}
		return resp, err
	}
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.tp), otelgrpc.WithMeterProvider(s.mp))),
		grpc.ChainUnaryInterceptor(rejecting, grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithAdmission(d),
			grpcmw.WithPriority(func(context.Context, string) moirai.Priority { return grpcmw.Lowest })), track(tel)))
	healthpb.RegisterHealthServer(srv, &ordersHealth{orders: ctl.Mutex("table:orders"), held: make(chan struct{})})
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()
	cc, err := grpc.NewClient("passthrough:///orders", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "orders"})
	if status.Code(err) != grpccodes.ResourceExhausted {
		t.Fatalf("call: %v, want ResourceExhausted", err)
	}
	srv.GracefulStop()
	var found int
	for _, sp := range s.spans.Ended() {
		if sp.SpanKind().String() != "server" {
			continue
		}
		found++
		a := moiraiAttrs(sp.Attributes())
		if a["moirai.action"].AsString() != "reject" || a["moirai.admission.level"].AsString() != admit.FormatLevel(d.Level()) || sp.Status().Code != codes.Error {
			t.Errorf("rejected call's span: %v, status %v", a, sp.Status())
		}
	}
	if found != 1 {
		t.Errorf("%d server spans, want 1", found)
	}
}

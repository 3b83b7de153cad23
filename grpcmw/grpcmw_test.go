package grpcmw_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/grpcmw"
)

func overloaded(t *testing.T) *admit.DAGOR {
	d := admit.NewDAGOR(admit.WithDAGORWindow(time.Hour, 10))
	for w := 0; w < 30; w++ {
		for i := 0; i < 10; i++ {
			d.AdmitPriority(0, moirai.Priority{})
			d.AdmitPriority(0, grpcmw.Lowest)
			d.Started(0, time.Second)
		}
	}
	return d
}

type counting struct {
	healthpb.HealthServer
	calls    int // handler runs
	arrivals int // calls that reached the server, admitted or not
	seen     moirai.Priority
}

func (c *counting) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	c.calls++
	c.seen = moirai.From(ctx).Spec().Priority
	return c.HealthServer.Check(ctx, r)
}

func setup(t *testing.T, sopts []grpcmw.Option, copts []grpcmw.ClientOption) (*moirai.Controller, healthpb.HealthClient, *counting) {
	ctl := moirai.New(moirai.WithTraceOnly())
	t.Cleanup(func() { ctl.Close() })
	lis := bufconn.Listen(1 << 16)
	hs := &counting{HealthServer: health.NewServer()}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			hs.arrivals++
			return h(ctx, req)
		}, grpcmw.UnaryServerInterceptor(ctl, sopts...)),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			hs.arrivals++
			return h(srv, ss)
		}, grpcmw.StreamServerInterceptor(ctl, sopts...)))
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///down", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(copts...)),
		grpc.WithStreamInterceptor(grpcmw.StreamClientInterceptor(copts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return ctl, healthpb.NewHealthClient(cc), hs
}

func TestRejectAndShedLocally(t *testing.T) {
	d := overloaded(t)
	ctl, c, hs := setup(t, []grpcmw.Option{grpcmw.WithAdmission(d), grpcmw.WithTrustedPeer(func(context.Context) bool { return true })}, nil)
	call := func(p moirai.Priority) error {
		ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: p})
		defer tk.End(nil)
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(grpcmw.Lowest); status.Code(err) != codes.ResourceExhausted || hs.calls != 0 {
		t.Fatalf("lowest: %v, calls %d; want ResourceExhausted from the server", err, hs.calls)
	}
	if err := call(moirai.Priority{}); err != nil || hs.calls != 1 {
		t.Fatalf("top: %v, calls %d", err, hs.calls)
	}
	if hs.seen != (moirai.Priority{}) {
		t.Fatalf("server ran at %v", hs.seen)
	}
	// The level is cached now: the next lowest call never leaves the client.
	before := hs.arrivals
	if err := call(grpcmw.Lowest); status.Code(err) != codes.ResourceExhausted || hs.arrivals != before {
		t.Fatalf("shed: %v, arrivals %d -> %d", err, before, hs.arrivals)
	}
}

func TestClientCannotRaiseItsPriority(t *testing.T) {
	assigned := moirai.Priority{Business: 7, User: 3}
	_, c, hs := setup(t, []grpcmw.Option{grpcmw.WithPriority(func(context.Context, string) moirai.Priority { return assigned })}, nil)
	before := grpcmw.Untrusted()
	ctx := metadata.AppendToOutgoingContext(t.Context(), grpcmw.KeyPriority, "0/0")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if hs.seen != assigned || grpcmw.Untrusted()-before != 1 {
		t.Fatalf("ran at %v (untrusted +%d), want %v", hs.seen, grpcmw.Untrusted()-before, assigned)
	}
}

// Watch is the health service's server stream: it records the priority the
// stream ran at and sends one update.
func (c *counting) Watch(r *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	c.calls++
	c.seen = moirai.From(s.Context()).Spec().Priority
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

func TestStreamRejectAndShedLocally(t *testing.T) {
	d := overloaded(t)
	ctl, c, hs := setup(t, []grpcmw.Option{grpcmw.WithAdmission(d), grpcmw.WithTrustedPeer(func(context.Context) bool { return true })}, nil)
	watch := func(p moirai.Priority) error {
		ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: p})
		defer tk.End(nil)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	if err := watch(grpcmw.Lowest); status.Code(err) != codes.ResourceExhausted || hs.calls != 0 {
		t.Fatalf("lowest: %v, calls %d; want ResourceExhausted from the server", err, hs.calls)
	}
	// The rejection carried the level: the next lowest stream is shed
	// before it is sent.
	if err := watch(grpcmw.Lowest); status.Code(err) != codes.ResourceExhausted || hs.arrivals != 1 {
		t.Fatalf("lowest again: %v, arrivals %d; want shed by the client", err, hs.arrivals)
	}
	if err := watch(moirai.Priority{}); err != nil || hs.calls != 1 {
		t.Fatalf("top: %v, calls %d", err, hs.calls)
	}
	if hs.seen != (moirai.Priority{}) {
		t.Fatalf("stream ran at %v", hs.seen)
	}
}

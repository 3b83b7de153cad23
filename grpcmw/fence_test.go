package grpcmw_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/grpcmw"
)

// relay is an upstream service: Check calls the downstream's Check, List
// answers locally.
type relay struct {
	healthpb.UnimplementedHealthServer
	down healthpb.HealthClient
}

func (r *relay) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return r.down.Check(ctx, in)
}

func (r *relay) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return &healthpb.HealthListResponse{}, nil
}

func serveRelay(t *testing.T, ctl *moirai.Controller, down healthpb.HealthClient, opts ...grpcmw.Option) healthpb.HealthClient {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, opts...)))
	healthpb.RegisterHealthServer(srv, &relay{down: down})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///up", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// TestFenceIsolatesAStalledPath: the upstream learns that Check calls
// the downstream; with the downstream stalled, Check calls hold at most
// their path's one permit and wait in its line, while List calls, local,
// keep running.
func TestFenceIsolatesAStalledPath(t *testing.T) {
	ctl, down, hs := setup(t, nil, nil) // the downstream: target passthrough:///down
	f, err := fence.New(3, []fence.Reservation{{Name: "passthrough:///down", Permits: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cls := fence.NewClassifier(f)
	up := serveRelay(t, ctl, down, grpcmw.WithFence(cls))
	ctx := t.Context()

	if _, err := up.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	const check = "/grpc.health.v1.Health/Check"
	if got := cls.PathOf(check).Name(); got != "passthrough:///down" {
		t.Fatalf("Check's path %q after one call, want the downstream's", got)
	}
	if got := cls.PathOf("/grpc.health.v1.Health/List"); !got.IsLocal() {
		t.Fatalf("List's path %q, want local", got.Name())
	}

	hs.hold = make(chan struct{})
	stalled := make(chan error, 1)
	go func() {
		_, err := up.Check(ctx, &healthpb.HealthCheckRequest{})
		stalled <- err
	}()
	path := f.Path("passthrough:///down")
	waitFor(t, func() bool { return path.Running() == 1 })

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := up.Check(short, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("second Check while the path is stalled: %v, want DeadlineExceeded", err)
	}
	for range 5 {
		if _, err := up.List(ctx, &healthpb.HealthListRequest{}); err != nil {
			t.Fatalf("local List while the path is stalled: %v", err)
		}
	}
	close(hs.hold)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, s := range f.Stats().Paths {
			if s.InUse != 0 || s.Waiting != 0 {
				return false
			}
		}
		return true
	})
	// The first Check ran as local: its path was not known yet.
	if got := f.Stats().Paths[0].Completed; got != 6 {
		t.Errorf("local completed %d, want the 5 List calls and the first Check", got)
	}
}

// TestFencePathOfAndFullLine: an explicit path wins over the classifier,
// and a full line answers ResourceExhausted.
func TestFencePathOfAndFullLine(t *testing.T) {
	ctl, down, hs := setup(t, nil, nil)
	f, err := fence.New(2, []fence.Reservation{{Name: "slow", Permits: 1}}, fence.WithBacklog(1))
	if err != nil {
		t.Fatal(err)
	}
	up := serveRelay(t, ctl, down, grpcmw.WithFence(fence.NewClassifier(f)),
		grpcmw.WithPathOf(func(context.Context, string) string { return "slow" }))
	hs.hold = make(chan struct{})
	ctx := t.Context()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := up.Check(ctx, &healthpb.HealthCheckRequest{})
			errs <- err
		}()
	}
	slow := f.Path("slow")
	waitFor(t, func() bool { return slow.Running() == 1 && slow.Waiting() == 1 })
	if _, err := up.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third call with the line full: %v, want ResourceExhausted", err)
	}
	close(hs.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

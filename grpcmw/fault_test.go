package grpcmw_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/grpcmw"
)

// killable is a downstream service that can be killed and started again
// at the same address, with a new admission state each time.
type killable struct {
	mu   sync.Mutex
	lis  *bufconn.Listener
	srv  *grpc.Server
	ctl  *moirai.Controller
	hits int // calls that reached its handler
}

func (k *killable) start(t *testing.T, d *admit.DAGOR) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lis = bufconn.Listen(1 << 16)
	k.ctl = moirai.New(moirai.WithoutMechanisms())
	k.srv = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(k.ctl, grpcmw.WithAdmission(d),
		grpcmw.WithTrustedPeer(func(context.Context) bool { return true })),
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			k.mu.Lock()
			k.hits++
			k.mu.Unlock()
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(k.srv, health.NewServer())
	go k.srv.Serve(k.lis)
}

func (k *killable) kill() {
	k.mu.Lock()
	srv, ctl := k.srv, k.ctl
	k.srv, k.ctl = nil, nil
	k.mu.Unlock()
	if srv != nil {
		srv.Stop()
		ctl.Close()
	}
}

func (k *killable) dial(ctx context.Context, _ string) (net.Conn, error) {
	k.mu.Lock()
	lis := k.lis
	k.mu.Unlock()
	return lis.DialContext(ctx)
}

func (k *killable) calls() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hits
}

// TestDownstreamKilledAndRestarted: an upstream whose calls to a
// downstream go through a path fence and carry DAGOR priorities. While
// the downstream is overloaded the upstream learns its level and sheds
// low-priority calls itself; killed, calls fail Unavailable and release
// their permits; restarted with a fresh level, the stale level expires and
// calls go through again. No permit, task or goroutine is left behind.
func TestDownstreamKilledAndRestarted(t *testing.T) {
	down := &killable{}
	down.start(t, overloaded(t))
	t.Cleanup(down.kill)
	cc, err := grpc.NewClient("passthrough:///down", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(down.dial),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.5, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: 100 * time.Millisecond}),
		grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(grpcmw.WithLevelTTL(50*time.Millisecond))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	f, err := fence.New(4, []fence.Reservation{{Name: "down", Permits: 2}})
	if err != nil {
		t.Fatal(err)
	}
	up := serveRelay(t, ctl, healthpb.NewHealthClient(cc), grpcmw.WithFence(fence.NewClassifier(f)),
		grpcmw.WithPathOf(func(context.Context, string) string { return "down" }),
		grpcmw.WithPriority(func(context.Context, string) moirai.Priority { return grpcmw.Lowest }))
	check := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := up.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}

	// Overloaded: rejected there once, then shed here while the level holds.
	if err := check(); status.Code(err) != codes.ResourceExhausted || down.calls() != 0 {
		t.Fatalf("overloaded downstream: %v (its handler ran %d times), want ResourceExhausted", err, down.calls())
	}
	if err := check(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("shed locally: %v", err)
	}

	down.kill()
	time.Sleep(60 * time.Millisecond) // past the level's TTL
	for range 3 {
		if err := check(); status.Code(err) != codes.Unavailable {
			t.Fatalf("killed downstream: %v, want Unavailable", err)
		}
	}
	if p := f.Path("down"); p.InUse() != 0 || p.Waiting() != 0 || p.Completed() != 5 {
		t.Fatalf("path after failed calls: %d held, %d waiting, %d completed; want 0, 0, 5", p.InUse(), p.Waiting(), p.Completed())
	}

	down.start(t, admit.NewDAGOR(admit.WithWindow(time.Hour, 10)))
	waitFor(t, func() bool { return check() == nil })
	for range 5 {
		if err := check(); err != nil {
			t.Fatalf("restarted downstream: %v", err)
		}
	}
	if down.calls() < 6 {
		t.Fatalf("the restarted downstream's handler ran %d times, want at least 6", down.calls())
	}
	for _, s := range f.Stats().Paths {
		if s.InUse != 0 || s.Waiting != 0 {
			t.Fatalf("fence path %q: %+v, want nothing held", s.Name, s)
		}
	}
	if st := ctl.Stats(); st.Live != 0 {
		t.Fatalf("%d upstream tasks live after the calls", st.Live)
	}
}

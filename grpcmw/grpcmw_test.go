package grpcmw_test

import (
	"context"
	"net"
	"sync"
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
	d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10))
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
	// hold, when set, is received from before Check answers; panics makes
	// Check panic.
	hold   chan struct{}
	panics bool
	// cancelled, when set, makes Check fail with its context's cause once
	// held, as a handler that checks its context does.
	cancelled bool
}

func (c *counting) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	c.calls++
	c.seen = moirai.From(ctx).Spec().Priority
	if c.panics {
		panic("handler bug")
	}
	if c.hold != nil {
		<-c.hold
	}
	if c.cancelled && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return c.HealthServer.Check(ctx, r)
}

func setup(t *testing.T, sopts []grpcmw.Option, copts []grpcmw.ClientOption) (*moirai.Controller, healthpb.HealthClient, *counting) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	return setupWith(t, ctl, sopts, copts)
}

// setupWith serves the counting health service through ctl's interceptors,
// after the outer unary interceptors given.
func setupWith(t *testing.T, ctl *moirai.Controller, sopts []grpcmw.Option, copts []grpcmw.ClientOption, outer ...grpc.UnaryServerInterceptor) (*moirai.Controller, healthpb.HealthClient, *counting) {
	lis := bufconn.Listen(1 << 16)
	hs := &counting{HealthServer: health.NewServer()}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(append(append([]grpc.UnaryServerInterceptor{func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			hs.arrivals++
			return h(ctx, req)
		}}, outer...), grpcmw.UnaryServerInterceptor(ctl, sopts...))...),
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

// fakeAdmitter admits while admit is true and lets started calls start
// while start is true; it counts what it was told.
type fakeAdmitter struct {
	mu                    sync.Mutex
	admit, start          bool
	admits, starts, dones int
}

func (f *fakeAdmitter) Name() string { return "fake" }
func (f *fakeAdmitter) Admit(time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admits++
	return f.admit
}
func (f *fakeAdmitter) Started(_, _ time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	return f.start
}
func (f *fakeAdmitter) Done(_, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dones++
}

func TestAdmitterAndQueue(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	q := ctl.Queue("workers", 1, 0)
	a := &fakeAdmitter{admit: false, start: true}
	_, c, hs := setupWith(t, ctl, []grpcmw.Option{grpcmw.WithAdmitter(a), grpcmw.WithQueue(q)}, nil)
	check := func() error {
		_, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(); status.Code(err) != codes.ResourceExhausted || hs.calls != 0 {
		t.Fatalf("refused at arrival: %v, calls %d", err, hs.calls)
	}
	a.mu.Lock()
	a.admit, a.start = true, false
	a.mu.Unlock()
	if err := check(); status.Code(err) != codes.ResourceExhausted || hs.calls != 0 || q.Running() != 0 {
		t.Fatalf("dropped at start: %v, calls %d, running %d", err, hs.calls, q.Running())
	}
	a.mu.Lock()
	a.start = true
	a.mu.Unlock()
	if err := check(); err != nil || hs.calls != 1 || q.Running() != 0 {
		t.Fatalf("admitted: %v, calls %d, running %d", err, hs.calls, q.Running())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admits != 3 || a.starts != 2 || a.dones != 1 {
		t.Fatalf("admitter told admits %d starts %d dones %d, want 3 2 1", a.admits, a.starts, a.dones)
	}
	if st := ctl.Stats(); st.Live != 0 {
		t.Fatalf("%d tasks left live", st.Live)
	}
}

func TestQueueLineFullRejects(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	q := ctl.Queue("workers", 1, 1)
	_, c, hs := setupWith(t, ctl, []grpcmw.Option{grpcmw.WithQueue(q)}, nil)
	hs.hold = make(chan struct{})
	errs := make(chan error, 2)
	call := func() {
		_, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{})
		errs <- err
	}
	go call()
	waitFor(t, func() bool { return q.Running() == 1 })
	go call()
	waitFor(t, func() bool { return q.Waiting() == 1 })
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call with the line full: %v, want ResourceExhausted", err)
	}
	close(hs.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if q.Running() != 0 || q.Waiting() != 0 || ctl.Stats().Live != 0 {
		t.Fatalf("left running %d waiting %d live %d", q.Running(), q.Waiting(), ctl.Stats().Live)
	}
}

func TestHandlerPanicReleasesSlot(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	q := ctl.Queue("workers", 1, 0)
	recovering := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(ctx, req)
	}
	_, c, hs := setupWith(t, ctl, []grpcmw.Option{grpcmw.WithQueue(q)}, nil, recovering)
	hs.panics = true
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("panicking handler: %v", err)
	}
	if q.Running() != 0 || ctl.Stats().Live != 0 {
		t.Fatalf("after a panic: running %d, live %d", q.Running(), ctl.Stats().Live)
	}
}

// waitFor waits until cond holds, for state another goroutine reaches.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClientCannotLowerAnothersLevel: a hostile caller that sends the most
// restrictive admission level (and the top priority) in its request's
// metadata changes neither the server's level nor what other callers are
// admitted at.
func TestClientCannotLowerAnothersLevel(t *testing.T) {
	d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10))
	before := d.Level()
	ctl, c, hs := setup(t, []grpcmw.Option{grpcmw.WithAdmission(d)}, nil)
	hostile := metadata.AppendToOutgoingContext(t.Context(),
		grpcmw.KeyLevel, admit.FormatLevel(admit.Level{}), grpcmw.KeyPriority, "0/0")
	for range 20 {
		var header metadata.MD
		if _, err := c.Check(hostile, &healthpb.HealthCheckRequest{}, grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		if got := header.Get(grpcmw.KeyLevel); len(got) != 1 || got[0] != admit.FormatLevel(before) {
			t.Fatalf("server answered level %q, want its own %q", got, admit.FormatLevel(before))
		}
	}
	if d.Level() != before || d.Overloaded() {
		t.Fatalf("level %v (overloaded %v) after hostile calls, want %v", d.Level(), d.Overloaded(), before)
	}
	// Another caller, at the lowest priority, is still admitted.
	ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: grpcmw.Lowest})
	defer tk.End(nil)
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hs.calls != 21 {
		t.Fatalf("lowest-priority call after the hostile ones: %v (calls %d)", err, hs.calls)
	}
}

// TestContinuationAdmittedInTheGrace: a call of a task that an earlier call
// got through goes out as a continuation, past the client's local
// shedding, and a server that trusts the peer admits it at the level before
// its last cut; a server that does not trust the peer ignores the mark.
func TestContinuationAdmittedInTheGrace(t *testing.T) {
	cut := func() *admit.DAGOR {
		d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10), admit.WithGrace(time.Hour))
		for i := 0; i < 10; i++ {
			d.AdmitPriority(0, moirai.Priority{})
			d.AdmitPriority(0, grpcmw.Lowest)
			d.Started(0, time.Second)
		}
		if d.Level() != (admit.Level{}) {
			t.Fatalf("level %v after the cut, want {0 0}", d.Level())
		}
		return d
	}
	mid := moirai.Priority{Business: 5, User: 5}
	for _, trusted := range []bool{true, false} {
		d := cut()
		sopts := []grpcmw.Option{grpcmw.WithAdmission(d), grpcmw.WithPriority(func(context.Context, string) moirai.Priority { return mid })}
		if trusted {
			sopts = append(sopts, grpcmw.WithTrustedPeer(func(context.Context) bool { return true }))
		}
		ctl, c, hs := setup(t, sopts, nil)
		call := func(tk *moirai.Task, ctx context.Context) error {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}
		// A first call: rejected, and the client caches the level.
		ctx, first := ctl.Begin(t.Context(), moirai.Spec{Priority: mid})
		if err := call(first, ctx); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("trusted %v: first call: %v, want ResourceExhausted", trusted, err)
		}
		if first.AdmittedDownstream() {
			t.Fatalf("trusted %v: a rejected call marked its task admitted", trusted)
		}
		first.End(nil)
		// A task that got through elsewhere before the cut.
		ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: mid})
		tk.MarkAdmittedDownstream()
		before := hs.arrivals
		err := call(tk, ctx)
		tk.End(nil)
		if hs.arrivals != before+1 {
			t.Fatalf("trusted %v: the continuation was shed locally", trusted)
		}
		if trusted && (err != nil || d.Continued() != 1) {
			t.Fatalf("continuation from a trusted peer: %v, continued %d; want admitted", err, d.Continued())
		}
		if !trusted && (status.Code(err) != codes.ResourceExhausted || d.Continued() != 0) {
			t.Fatalf("continuation from an untrusted peer: %v, continued %d; want rejected", err, d.Continued())
		}
	}
}

// TestAdmittedCallMarksItsTask: the client marks a task once a call of it
// is admitted, so that its next calls are continuations.
func TestAdmittedCallMarksItsTask(t *testing.T) {
	ctl, c, _ := setup(t, []grpcmw.Option{grpcmw.WithAdmission(admit.NewDAGOR())}, nil)
	ctx, tk := ctl.Begin(t.Context(), moirai.Spec{})
	defer tk.End(nil)
	if tk.AdmittedDownstream() {
		t.Fatal("a new task is marked admitted downstream")
	}
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if !tk.AdmittedDownstream() {
		t.Fatal("an admitted call did not mark its task")
	}
}

// TestUnreachableCallDoesNotMarkItsTask: a call that never reached a
// server (Unavailable) does not make the task's next calls continuations.
func TestUnreachableCallDoesNotMarkItsTask(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	lis := bufconn.Listen(1 << 16)
	lis.Close() // nobody answers
	cc, err := grpc.NewClient("passthrough:///down", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, tk := ctl.Begin(t.Context(), moirai.Spec{})
	defer tk.End(nil)
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call to a closed listener: %v, want Unavailable", err)
	}
	if tk.AdmittedDownstream() {
		t.Fatal("an unreachable call marked its task admitted downstream")
	}
}

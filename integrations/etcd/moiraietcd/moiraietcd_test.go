package moiraietcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/integrations/etcd/moiraietcd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newInstalled returns a controller that never acts on its own (trace
// only) with the package installed on it.
func newInstalled(t *testing.T) *moirai.Controller {
	t.Helper()
	ctl := moirai.New(moirai.WithTraceOnly())
	uninstall, err := moiraietcd.Install(ctl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		uninstall()
		if err := ctl.Close(); err != nil {
			t.Error(err)
		}
	})
	return ctl
}

func TestPlainLockIsAnRWMutex(t *testing.T) {
	before := moiraietcd.Created()
	l := moiraietcd.NewIndexLock()
	if got := moiraietcd.Created() - before; got != 1 {
		t.Fatalf("Created grew by %d, want 1", got)
	}
	l.RLock()
	h := l.RLockCtx(context.Background())
	locked := make(chan struct{})
	go func() {
		l.Lock()
		close(locked)
		l.Unlock()
	}()
	select {
	case <-locked:
		t.Fatal("Lock while two readers hold the lock")
	case <-time.After(20 * time.Millisecond):
	}
	h.RUnlock()
	l.RUnlock()
	<-locked
}

func TestWalkHoldIsTheTasks(t *testing.T) {
	ctl := newInstalled(t)
	l := moiraietcd.NewIndexLock()
	ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "range", Cancellable: true})
	defer task.End(nil)
	h := l.RLockCtx(ctx)
	locked := make(chan struct{})
	go func() {
		l.Lock() // the apply loop
		close(locked)
		l.Unlock()
	}()
	// The apply loop's task waits behind the walk's.
	waitFor(t, func() bool { return holdsAndWaits(ctl, task.ID(), moiraietcd.ResourceName) })
	h.RUnlock()
	<-locked
}

// holdsAndWaits reports whether the task holds the resource while another
// task waits for it.
func holdsAndWaits(ctl *moirai.Controller, id uint64, name string) bool {
	s := ctl.Snapshot()
	held, waited := false, false
	for _, tk := range s.Tasks {
		for _, u := range s.Usage[tk.First : tk.First+tk.N] {
			if s.Resources[u.Res].Name != name {
				continue
			}
			if tk.ID == id && u.Held > 0 {
				held = true
			}
			if tk.ID != id && u.Waiting > 0 {
				waited = true
			}
		}
	}
	return held && waited
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCancelledWalkStopsAtItsFirstKey(t *testing.T) {
	ctl := newInstalled(t)
	l := moiraietcd.NewIndexLock()
	ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "range", Cancellable: true})
	defer task.End(nil)
	if err := ctl.Cancel(task.ID(), "test"); err != nil {
		t.Fatal(err)
	}
	// The lock refuses the cancelled task; RLockCtx locks for no task,
	// so the caller may look, and the walk stops at its first key.
	h := l.RLockCtx(ctx)
	if moiraietcd.Visit(ctx, 1, 100) {
		t.Error("Visit of a cancelled walk's first key: true, want false")
	}
	h.RUnlock()
	mustLock(t, l) // nothing left held
	if !errors.Is(context.Cause(ctx), moirai.ErrCancelled) {
		t.Errorf("cause %v, want ErrCancelled", context.Cause(ctx))
	}
}

// mustLock fails the test if l cannot be locked for writing within 5s.
func mustLock(t *testing.T, l moiraietcd.IndexLock) {
	t.Helper()
	locked := make(chan struct{})
	go func() {
		l.Lock()
		close(locked)
		l.Unlock()
	}()
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock is still held")
	}
}

func TestVisitLooksEveryFewKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		n    int64
		want bool
	}{{1, false}, {2, true}, {256, true}, {257, false}, {513, false}} {
		if got := moiraietcd.Visit(ctx, tc.n, 1000); got != tc.want {
			t.Errorf("Visit(done ctx, %d): %v, want %v", tc.n, got, tc.want)
		}
	}
	if !moiraietcd.Visit(context.Background(), 1, 1000) {
		t.Error("Visit(live ctx, 1): false")
	}
}

func TestInstallTwiceFails(t *testing.T) {
	ctl := newInstalled(t)
	if _, err := moiraietcd.Install(ctl); err == nil {
		t.Fatal("second Install on one controller: no error")
	}
}

func TestWaitApplyIsAWaitForTheLoop(t *testing.T) {
	moiraietcd.WaitApply(context.Background()).End() // nothing installed: no-op
	ctl := newInstalled(t)
	ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "put"})
	defer task.End(nil)
	w := moiraietcd.WaitApply(ctx)
	s := ctl.Snapshot()
	waiting := false
	for _, tk := range s.Tasks {
		for _, u := range s.Usage[tk.First : tk.First+tk.N] {
			if tk.ID == task.ID() && s.Resources[u.Res].Name == moiraietcd.ApplyName && u.Waiting > 0 {
				waiting = true
			}
		}
	}
	w.End()
	if !waiting {
		t.Error("the put does not wait for the apply loop")
	}
}

func TestInterceptorAnswersCancelledAsEtcdSheds(t *testing.T) {
	ctl := newInstalled(t)
	in := moiraietcd.UnaryServerInterceptor(ctl)
	info := &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.KV/Range"}
	wide := &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b"), KeysOnly: true}
	_, err := in(context.Background(), wide, info, func(ctx context.Context, _ any) (any, error) {
		if c := moirai.From(ctx).Spec().Class; c != "/etcdserverpb.KV/Range keys-only" {
			t.Errorf("class %q, want the method and the shape", c)
		}
		if err := ctl.Cancel(moirai.From(ctx).ID(), "test"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("cancelled call: %v, want ResourceExhausted", err)
	}
	_, err = in(context.Background(), wide, info, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.Unavailable, "down")
	})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a handler's own Unavailable: %v, want it unchanged", err)
	}
}

func TestOnlyWalksAreCancellable(t *testing.T) {
	ctl := newInstalled(t)
	in := moiraietcd.UnaryServerInterceptor(ctl)
	for _, tc := range []struct {
		method string
		req    any
		want   bool
	}{
		{"/etcdserverpb.KV/Put", &pb.PutRequest{Key: []byte("a")}, false},
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{Key: []byte("a")}, false},
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b")}, true},
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b"), CountOnly: true}, true},
	} {
		_, _ = in(context.Background(), tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(ctx context.Context, _ any) (any, error) {
			if got := moirai.From(ctx).Spec().Cancellable; got != tc.want {
				t.Errorf("%s %v: cancellable %v, want %v", tc.method, tc.req, got, tc.want)
			}
			return nil, nil
		})
	}
}

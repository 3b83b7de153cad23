package moiraietcd_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai/integrations/etcd/moiraietcd"
)

type culpritMark struct{}

// The oracle cancels a culprit's walk the moment a writer finds the lock
// taken, and nothing else: a reader that is not a culprit is waited for.
func TestOracleCancelsTheCulpritWhenAWriterWaits(t *testing.T) {
	intercept, cancelled, uninstall := moiraietcd.InstallOracle(func(ctx context.Context) bool { return ctx.Value(culpritMark{}) != nil })
	defer uninstall()
	l := moiraietcd.NewIndexLock()
	info := &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.KV/Range"}

	// A reader that is no culprit holds the lock: the writer waits for it.
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := intercept(context.Background(), nil, info, func(ctx context.Context, _ any) (any, error) {
			h := l.RLockCtx(ctx)
			close(held)
			<-release
			h.RUnlock()
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-held
	locked := make(chan struct{})
	go func() { l.Lock(); close(locked) }()
	select {
	case <-locked:
		t.Fatal("the writer got the lock a reader holds")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-locked
	l.Unlock()
	if err := <-done; err != nil || cancelled() != 0 {
		t.Fatalf("a reader that is no culprit: err %v, %d cancelled; want nil, 0", err, cancelled())
	}

	// A culprit walks until its context is done; a writer's wait ends it.
	walking := make(chan struct{})
	go func() {
		ctx := context.WithValue(context.Background(), culpritMark{}, true)
		_, err := intercept(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
			h := l.RLockCtx(ctx)
			defer h.RUnlock()
			close(walking)
			for n := int64(1); moiraietcd.Visit(ctx, n, 1<<40); n++ {
			}
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-walking
	l.Lock()
	l.Unlock()
	err := <-done
	if status.Code(err) != codes.ResourceExhausted || cancelled() != 1 {
		t.Fatalf("the culprit: err %v, %d cancelled; want ResourceExhausted, 1", err, cancelled())
	}
}

package grpcmw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// liveTasks waits for the held call's task and returns the snapshot's
// tasks.
func liveTasks(t *testing.T, ctl *moirai.Controller) []snapshot.Task {
	t.Helper()
	var s *snapshot.Snapshot
	waitFor(t, func() bool { s = ctl.Snapshot(); return len(s.Tasks) > 0 })
	return s.Tasks
}

// Interceptors of one controller chained twice (a server-wide one and a
// per-service one): one task per call, the inner one's options applied to
// it.
func TestNestedInterceptorsShareTheTask(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	_, client, hs := setupWith(t, ctl, []grpcmw.Option{
		grpcmw.WithClass(func(string) string { return "health" }),
		grpcmw.WithObjective(2*time.Second, "health"),
		grpcmw.WithBackground("health"),
		grpcmw.WithCancellable(true),
	}, nil, grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithCancellable(false), grpcmw.WithObjective(time.Second)))
	hs.hold = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		done <- err
	}()
	tasks := liveTasks(t, ctl)
	close(hs.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 {
		t.Fatalf("%d live tasks for one call; want 1", len(tasks))
	}
	tk := tasks[0]
	if tk.Class != "health" || tk.Kind != task.Background || tk.Objective != 2*time.Second || !tk.Cancellable {
		t.Errorf("task %+v; want the inner interceptor's class, objective, kind and cancellability", tk)
	}
	var tot task.Totals
	ctl.Tasks().TotalsInto(&tot)
	if tot.Begun != 1 || tot.Ended != 1 {
		t.Errorf("%d begun, %d ended; want 1 and 1", tot.Begun, tot.Ended)
	}
}

// WithExposedCause puts the cancellation's reason in the status message;
// without it (TestCancelledCallIsUnavailable) the message says only that
// the server is overloaded.
func TestExposedCause(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	_, client, hs := setupWith(t, ctl, []grpcmw.Option{grpcmw.WithExposedCause()}, nil,
		grpcmw.UnaryServerInterceptor(ctl)) // nested: the inner one answers
	hs.hold, hs.cancelled = make(chan struct{}), true
	go func() {
		defer close(hs.hold)
		for {
			if s := ctl.Snapshot(); len(s.Tasks) > 0 {
				if err := ctl.Cancel(s.Tasks[0].ID, "secret internal reason"); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want Unavailable", err)
	}
	msg := status.Convert(err).Message()
	if !strings.HasPrefix(msg, "server overloaded: ") || !strings.Contains(msg, "secret internal reason") {
		t.Errorf("message %q; want the reason after server overloaded", msg)
	}
}

package grpcmw_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
)

// A call the controller cancels fails with UNAVAILABLE, a message that
// does not carry the reason, and a retry-after in the trailer.
func TestCancelledCallIsUnavailable(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	t.Cleanup(func() { ctl.Close() })
	_, client, hs := setupWith(t, ctl, []grpcmw.Option{grpcmw.WithCancellable(true)}, nil)
	hs.hold, hs.cancelled = make(chan struct{}), true
	go func() {
		// Cancel the call once its task is live, then let the handler go.
		for {
			s := ctl.Snapshot()
			if len(s.Tasks) > 0 {
				if err := ctl.Cancel(s.Tasks[0].ID, "secret internal reason"); err != nil {
					t.Error(err)
				}
				close(hs.hold)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var trailer metadata.MD
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want Unavailable", err)
	}
	if msg := status.Convert(err).Message(); msg != "server overloaded" {
		t.Errorf("message %q", msg)
	}
	if got := trailer.Get(grpcmw.KeyRetryAfter); len(got) != 1 || got[0] != "1" {
		t.Errorf("retry-after %v, want [1] (no learned duration)", got)
	}
}

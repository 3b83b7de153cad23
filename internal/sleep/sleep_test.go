package sleep

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := For(context.Background(), 30*time.Millisecond); err != nil || time.Since(start) != 30*time.Millisecond {
			t.Errorf("full wait: %v after %v", err, time.Since(start))
		}
		stop := errors.New("stopped")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(10*time.Millisecond, func() { cancel(stop) })
		start = time.Now()
		if err := For(ctx, time.Second); !errors.Is(err, stop) || time.Since(start) != 10*time.Millisecond {
			t.Errorf("cut short: %v after %v, want the cause after 10ms", err, time.Since(start))
		}
	})
}

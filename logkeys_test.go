package moirai_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
)

// syncBuffer is a log sink safe for the controller's goroutine and the
// test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The decision log carries no task key unless WithLoggedKeys: not in a
// cancellation's record, nor in a re-execution's drop, nor in the report
// of a task never ended.
func TestDecisionLogHidesKeys(t *testing.T) {
	const key = "tenant-4711"
	for _, logged := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var out syncBuffer
			opts := []moirai.Option{moirai.WithLogger(slog.New(slog.NewTextHandler(&out, nil))),
				moirai.WithoutMechanisms(), moirai.WithTick(10*time.Millisecond, 10*time.Millisecond),
				moirai.WithUnendedGrace(50 * time.Millisecond)}
			if logged {
				opts = append(opts, moirai.WithLoggedKeys())
			}
			ctl := moirai.New(opts...)
			// A cancelled run whose re-execution is dropped (its
			// objective is past at once).
			out1 := retryAndCancelAfter(t, ctl, moirai.Spec{Class: "order", Key: key, Cancellable: true, Objective: time.Millisecond},
				func(ctx context.Context, run int) error { <-ctx.Done(); return context.Cause(ctx) }, 10*time.Millisecond)
			if err := <-out1; err == nil {
				t.Fatal("Retry: no error; want the run dropped")
			}
			// A task never ended, its request over.
			rctx, done := context.WithCancel(context.Background())
			ctl.Begin(rctx, moirai.Spec{Class: "leak", Key: key})
			done()
			time.Sleep(time.Second)
			ctl.Close()
			log := out.String()
			for _, msg := range []string{"moirai decision", "moirai drop", "never ended"} {
				if !strings.Contains(log, msg) {
					t.Errorf("the log has no %q:\n%s", msg, log)
				}
			}
			if logged != strings.Contains(log, key) {
				t.Errorf("WithLoggedKeys %v, key in the log %v:\n%s", logged, !logged, log)
			}
			if !logged && !strings.Contains(log, "key=hidden") {
				t.Errorf("the log does not say the key is hidden:\n%s", log)
			}
		})
	}
}

package moirai_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/tree"
)

// A run cancelled because its tree was a culprit at another hop is not
// re-executed before the wait that hop expects, though its own resources
// are free at once; an ordinary cancellation is re-executed as soon as
// its window comes.
func TestReexecutionWaitsTheDecidingHop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		culprit bool
		wait    time.Duration
	}{{"tree", true, 3 * time.Second}, {"local", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctl := moirai.New(moirai.WithoutMechanisms(), moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
				defer ctl.Close()
				id := tree.New("/front")
				started := make(chan *moirai.Task, 1)
				var second time.Time
				runs := 0
				out := make(chan error, 1)
				begin := time.Now()
				go func() {
					out <- moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "front", Cancellable: true, Tree: id, Kind: moirai.Background},
						func(ctx context.Context) error {
							runs++
							if runs == 1 {
								started <- moirai.From(ctx)
								<-ctx.Done()
								return context.Cause(ctx)
							}
							second = time.Now()
							return nil
						}, moirai.RetryQuiet(0))
				}()
				tk := <-started
				if tc.culprit {
					if err := ctl.CancelTree(tk, tree.Answer(id, "b", "holds the lock", tc.wait)); err != nil {
						t.Fatal(err)
					}
				} else if err := ctl.Cancel(tk.ID(), "local"); err != nil {
					t.Fatal(err)
				}
				if err := <-out; err != nil {
					t.Fatal(err)
				}
				if got := second.Sub(begin); got < tc.wait || got > tc.wait+time.Second {
					t.Fatalf("re-executed after %v, want just after %v", got, tc.wait)
				}
			})
		})
	}
}

// CancelTree refuses a culprit of another tree, and records the hop that
// decided in its decision.
func TestCancelTree(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true, Tree: tree.New("/a")})
	defer tk.End(nil)
	if err := ctl.CancelTree(tk, tree.Answer(tree.New("/a"), "b", "x", 0)); err == nil || tk.Cancelled() {
		t.Fatalf("another tree's culprit: %v, cancelled %v", err, tk.Cancelled())
	}
	if err := ctl.CancelTree(tk, tree.Answer(tk.Spec().Tree, "b", "holds the lock", time.Second)); err != nil {
		t.Fatal(err)
	}
	cause := context.Cause(ctx)
	if cu, ok := tree.Of(cause); !ok || cu.Hop != "b" || !errors.Is(cause, moirai.ErrCancelled) {
		t.Fatalf("cause %v", cause)
	}
	d := ctl.Decisions()
	if len(d) != 1 || d[0].Decision.Policy != "tree" || d[0].Outcome != policy.Acted || !strings.Contains(d[0].Decision.Reason, "culprit at b (holds the lock)") {
		t.Fatalf("decisions %+v", d)
	}
	if cu, ok := ctl.CulpritAnswer(ctx, "me"); !ok || cu.Hop != "b" {
		t.Fatalf("answer %+v %v: want the deciding hop b kept", cu, ok)
	}
}

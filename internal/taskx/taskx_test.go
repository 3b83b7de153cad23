package taskx_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// TestFlaggedInline checks that the inline reading of a task's state word
// agrees with package task's own method, over random sequences of the
// events that change the word (penalties, cancellations, penalties taken,
// claims, ends), seeded and replayable.
func TestFlaggedInline(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	reg := taskx.NewRegistry(clock.New(), task.Options{})
	if taskx.Flagged(nil) || taskx.FlaggedSlow(nil) {
		t.Fatal("a nil task is flagged")
	}
	for range 200 {
		_, tk := reg.Begin(context.Background(), task.Spec{Class: "c", Cancellable: rng.IntN(2) == 0})
		for step := range 20 {
			switch rng.IntN(6) {
			case 0:
				taskx.Penalize(tk, time.Duration(1+rng.IntN(1000))*time.Microsecond)
			case 1:
				_ = taskx.Cancel(tk, "test")
			case 2:
				tk.TakePenalty()
			case 3:
				taskx.Claim(tk, task.ResourceID(1+rng.IntN(12)))
			case 4:
				tk.MarkAdmittedDownstream()
			case 5:
				if rng.IntN(4) == 0 {
					tk.End(nil)
				}
			}
			if got, want := taskx.Flagged(tk), taskx.FlaggedSlow(tk); got != want {
				t.Fatalf("seed %d, task %d, step %d: inline Flagged %v, method %v", seed, tk.ID(), step, got, want)
			}
		}
		tk.End(nil)
	}
}

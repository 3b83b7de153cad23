package policy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{policy.Cancel.String(), "cancel"},
		{policy.Action(99).String(), "action(99)"},
		{policy.Acted.String(), "acted"},
		{policy.Skipped.String(), "skipped"},
		{policy.DryRun.String(), "dry-run"},
		{policy.Outcome(0).String(), "outcome(0)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestRecordAttrs(t *testing.T) {
	r := policy.Record{
		Seq: 3, Time: time.Unix(0, 0),
		Decision: policy.Decision{Policy: "atropos", Action: policy.Cancel, Task: 42, Reason: "holds table:orders",
			Details: []slog.Attr{slog.Float64("score", 0.9)}},
		TaskClass: "dump", Outcome: policy.Skipped, Note: "not cancellable",
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).LogAttrs(context.Background(), slog.LevelInfo, "d", r.Attrs()...)
	for _, want := range []string{"seq=3", "policy=atropos", "action=cancel", "task=42", "outcome=skipped", `note="not cancellable"`, "details.score=0.9"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log line %q lacks %q", b.String(), want)
		}
	}
}

func ExampleRecord_Attrs() {
	r := policy.Record{Seq: 1, Decision: policy.Decision{Policy: "manual", Action: policy.Cancel, Task: 7, Reason: "operator"}, Outcome: policy.Acted}
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	slog.New(h).LogAttrs(context.Background(), slog.LevelInfo, "moirai decision", r.Attrs()...)
	fmt.Println(r.Outcome)
	// Output:
	// level=INFO msg="moirai decision" seq=1 policy=manual action=cancel task=7 class="" key="" outcome=acted reason=operator
	// acted
}

// holdLongest is a minimal Policy: cancel the cancellable task that has held
// anything the longest, once it passes a limit.
type holdLongest struct{ limit time.Duration }

func (holdLongest) Name() string { return "hold-longest" }

func (p holdLongest) Decide(s *snapshot.Snapshot) []policy.Decision {
	best, bestHold := -1, p.limit
	for i := range s.Tasks {
		if !s.Tasks[i].Cancellable || s.Tasks[i].Cancelled {
			continue
		}
		for _, u := range s.UsageOf(i) {
			if u.Held > 0 && u.Hold > bestHold {
				best, bestHold = i, u.Hold
			}
		}
	}
	if best < 0 {
		return nil
	}
	return []policy.Decision{{
		Action: policy.Cancel, Task: s.Tasks[best].ID,
		Reason:  "held a resource for " + bestHold.String(),
		Details: []slog.Attr{slog.Duration("hold", bestHold)},
	}}
}

// sloBreached is a minimal Detector: the window's p99 above a target.
type sloBreached struct{ target time.Duration }

func (sloBreached) Name() string { return "slo" }

func (d sloBreached) Detect(s *snapshot.Snapshot) (bool, string) {
	p99 := s.Completed.Latency.Quantile(0.99)
	return p99 > d.target, "p99 " + p99.String()
}

func snap() *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Tasks: []snapshot.Task{{ID: 1, Cancellable: true, N: 1}, {ID: 2, First: 1, N: 1}},
		Usage: []snapshot.Usage{
			{Usage: task.Usage{Held: 1, Hold: 3 * time.Second}},
			{Task: 1, Usage: task.Usage{Waiting: 1, Wait: time.Second}},
		},
	}
	for range 100 {
		s.Completed.Latency.Record(200 * time.Millisecond)
	}
	return s
}

func ExamplePolicy() {
	var p policy.Policy = holdLongest{limit: time.Second}
	for _, d := range p.Decide(snap()) {
		fmt.Println(p.Name(), d.Action, d.Task, d.Reason)
	}
	// Output: hold-longest cancel 1 held a resource for 3s
}

func ExampleDetector() {
	var d policy.Detector = sloBreached{target: 50 * time.Millisecond}
	fmt.Println(d.Detect(snap()))
	// Output: true p99 212.992ms
}

func ExampleDecision() {
	d := policy.Decision{Policy: "atropos", Action: policy.Cancel, Task: 12, Reason: "largest gain on table:orders"}
	fmt.Printf("%s: %s task %d (%s)\n", d.Policy, d.Action, d.Task, d.Reason)
	// Output: atropos: cancel task 12 (largest gain on table:orders)
}

func ExampleAction() {
	fmt.Println(policy.Cancel)
	// Output: cancel
}

func ExampleOutcome() {
	for _, o := range []policy.Outcome{policy.Acted, policy.Skipped, policy.DryRun} {
		fmt.Println(o)
	}
	// Output:
	// acted
	// skipped
	// dry-run
}

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

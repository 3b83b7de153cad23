package debugpage_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// detailed is a policy that cancels the first cancellable task with a
// structured explanation.
type detailed struct{ done bool }

func (*detailed) Name() string { return "detailed" }

func (p *detailed) Decide(s *snapshot.Snapshot) []policy.Decision {
	for _, t := range s.Tasks {
		if t.Cancellable && !p.done {
			p.done = true
			return []policy.Decision{{Action: policy.Cancel, Task: t.ID, Reason: "test",
				Details: []slog.Attr{slog.Group("top", slog.Group("#1", slog.Float64("loss_resource_s", 0.5)))}}}
		}
	}
	return nil
}

// The JSON twin carries the task's progress, the re-execution counts and
// the decisions' details as objects, not strings.
func TestStructuredJSON(t *testing.T) {
	p := &detailed{}
	ctl := moirai.New(moirai.WithPolicy(p))
	defer ctl.Close()
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
	tk.Progress(1, 4)
	<-ctx.Done()
	_, other := ctl.Begin(context.Background(), moirai.Spec{Class: "light"})
	other.Progress(3, 4)
	defer other.End(nil)
	tk.End(nil)
	w := httptest.NewRecorder()
	debugpage.Handler(ctl, debugpage.Config{}).ServeHTTP(w, httptest.NewRequest("GET", "/?format=json", nil))
	var v struct {
		Tasks []struct {
			Class    string   `json:"class"`
			Progress *float64 `json:"progress"`
		} `json:"tasks"`
		Reexecution map[string]any `json:"reexecution"`
		Decisions   []struct {
			Details map[string]map[string]map[string]float64 `json:"details"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("%v\n%s", err, w.Body.String())
	}
	if len(v.Tasks) != 1 || v.Tasks[0].Progress == nil || *v.Tasks[0].Progress != 0.75 {
		t.Errorf("tasks %+v", v.Tasks)
	}
	if _, ok := v.Reexecution["waiting"]; !ok {
		t.Errorf("reexecution %v", v.Reexecution)
	}
	if len(v.Decisions) != 1 || v.Decisions[0].Details["top"]["#1"]["loss_resource_s"] != 0.5 {
		t.Errorf("decisions %+v", v.Decisions)
	}
	w = httptest.NewRecorder()
	debugpage.Handler(ctl, debugpage.Config{}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if body := w.Body.String(); !strings.Contains(body, "75%") || !strings.Contains(body, "loss_resource_s=0.5") {
		t.Errorf("page lacks the progress or the details:\n%s", body)
	}
}

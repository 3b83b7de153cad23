package dbsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// lockSource is a server where session 10 has held a table for ten
// seconds and session 20 waits for it.
type lockSource struct {
	start   time.Time // the sessions' start, fixed: a task is its transaction
	mu      sync.Mutex
	cancels []guard.Target
}

func (*lockSource) Name() string     { return "fake" }
func (*lockSource) Database() string { return "app" } // the guard's scope (guard.Scoped)
func (*lockSource) Check(context.Context) (guard.ServerInfo, error) {
	return guard.ServerInfo{Version: "fake 1"}, nil
}
func (s *lockSource) Poll(context.Context) (*guard.Observation, error) {
	now := time.Now()
	held, waits := s.start.Add(-10*time.Second), s.start.Add(-2*time.Second)
	return &guard.Observation{At: now,
		Sessions: []guard.Session{
			{ID: 10, User: "app", Database: "app", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = v", XactStart: held, QueryStart: held},
			{ID: 20, User: "app", Database: "app", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = 1 WHERE id = 1", XactStart: waits, QueryStart: waits},
		},
		Resources: []guard.Resource{{Name: "relation:t", Kind: resource.KindLock}},
		Uses: []guard.Use{
			{Session: 10, Resource: "relation:t", Held: true, Since: held},
			{Session: 20, Resource: "relation:t", Waiting: true, BlockedBy: []int64{10}, Since: waits},
		}}, nil
}
func (s *lockSource) Cancel(_ context.Context, t guard.Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancels = append(s.cancels, t)
	return nil
}
func (s *lockSource) Terminate(ctx context.Context, t guard.Target) error { return s.Cancel(ctx, t) }
func (*lockSource) Close() error                                          { return nil }

// TestRunGuardAudit: the suites' guard writes a line naming the run, then
// its decisions, to Options.GuardAudit, and counts the cancel of a
// session isCulprit accepts as the culprit's.
func TestRunGuardAudit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var audit bytes.Buffer
		opt := Options{GuardAudit: &audit}
		opt.defaults()
		opt.GuardInterval = 100 * time.Millisecond
		src := &lockSource{start: time.Now()}
		stop, err := runGuard(t.Context(), &opt, "mysql/my-case", src, func(d guard.Decision) bool { return d.Target.Session == 10 })
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		culprits, victims, err := stop()
		if err != nil || culprits != 1 || victims != 0 {
			t.Fatalf("culprits %d victims %d err %v; want the one cancel of session 10", culprits, victims, err)
		}
		lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("audit:\n%s\nwant the run's line and one decision", audit.String())
		}
		var first, second map[string]any
		if json.Unmarshal([]byte(lines[0]), &first) != nil || first["run"] != "mysql/my-case" {
			t.Errorf("first line %s: want the run's name", lines[0])
		}
		if json.Unmarshal([]byte(lines[1]), &second) != nil || second["outcome"] != guard.OutcomeActed || second["session"] != float64(10) {
			t.Errorf("second line %s: want the acted cancel of session 10", lines[1])
		}
	})
}

package replicas

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/guard"
)

// RecordReplay runs a dry-run guard on one of srv's incidents with its
// polls recorded (Options.Record), until it decides on the holder, then
// replays the recording (guard.ReadPolls, guard.Replay) and checks that
// the replay decides exactly what the live guard did: the same actions
// on the same statements, for the same reasons. It returns the number of
// polls recorded.
func RecordReplay(t *testing.T, srv Server) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	src, err := srv.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var rec bytes.Buffer
	opt := guard.Options{Interval: srv.Interval, AlertInterval: srv.Interval, SLO: 4 * srv.Interval, DryRun: true,
		Protect: guard.Protection{AllowSuperuser: true}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	live := opt
	live.Record = &lockedBuffer{b: &rec}
	g, err := guard.New(src, live)
	if err != nil {
		t.Fatal(err)
	}
	holder, cleanup := srv.Incident(ctx, t)
	defer cleanup()
	var want []guard.Decision
	decided := false
	for poll := 0; poll < 60 && !decided; poll++ {
		ds, err := g.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			want = append(want, d)
			decided = decided || d.Target.Session == holder && d.Outcome == guard.OutcomeDryRun
		}
		time.Sleep(srv.Interval)
	}
	if !decided {
		t.Fatalf("the live guard never decided on the holder: %+v", want)
	}
	recording, err := guard.ReadPolls(bytes.NewReader(rec.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := guard.Replay(recording, opt)
	if err != nil {
		t.Fatal(err)
	}
	norm := func(ds []guard.Decision) []guard.Decision {
		out := make([]guard.Decision, len(ds))
		for i, d := range ds {
			d.Evaluation = nil // maps of floats, compared through Reason
			d.Target.QueryStart, d.Target.XactStart = d.Target.QueryStart.UTC(), d.Target.XactStart.UTC()
			d.Time = d.Time.UTC()
			out[i] = d
		}
		return out
	}
	if diff := cmp.Diff(norm(want), norm(got)); diff != "" {
		t.Fatalf("replay of %d polls decided otherwise than the live guard (-live +replay):\n%s", len(recording.Polls), diff)
	}
	return len(recording.Polls)
}

// lockedBuffer is a recording the guard writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// UntilActed steps g every interval, at most polls times, until it acts
// (or fails to), and returns those decisions.
func UntilActed(ctx context.Context, t *testing.T, g *guard.Guard, interval time.Duration, polls int) []guard.Decision {
	t.Helper()
	var acted []guard.Decision
	for range polls {
		ds, err := g.Step(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, d := range ds {
			if d.Outcome == guard.OutcomeActed || d.Outcome == guard.OutcomeFailed {
				acted = append(acted, d)
			}
		}
		if len(acted) > 0 {
			return acted
		}
		time.Sleep(interval)
	}
	return acted
}

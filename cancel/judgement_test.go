package cancel

import (
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// A cancellation after which the others wait behind a task of the class
// cancelled that came after it is a new incident: it is decided on as the
// first was. Behind a task of another class, the others wait for another
// culprit: it is cancelled.
func TestJudgementRefutesTheClassCancelled(t *testing.T) {
	for _, c := range []struct {
		name     string
		next     string // the class of the next holder
		reports  bool
		refuted  bool
		decideOn bool
	}{
		// Task 2 came after the cancellation (the next run of a
		// recurring culprit): a new incident, cancelled as task 1 was.
		// A refutation needs a task that held at the decision still
		// holding (a crowd of one class: cancel/starve_test.go).
		{"same class, a new holder", "q", false, false, true},
		{"same class reporting progress", "q", true, false, true},
		// Task 2 is not cancellable: the others wait behind it past
		// the judgement, which refutes nothing; the next holder of
		// class q is cancelled.
		{"another class", "other", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(10*ms))
			at := time.Duration(0)
			// holder: task id of class holds the lock for hold while
			// three requests of class "w" wait behind it.
			snap := func(id uint64, class string, hold time.Duration, waiters int) *snapshot.Snapshot {
				at += 5 * ms
				s := &snapshot.Snapshot{At: at, Window: 5 * ms, Completed: snapshot.Completions{Exec: 5 * ms},
					Resources: []snapshot.Resource{{Name: "table", Kind: resource.KindLock, Held: 1, Waiters: waiters,
						WindowWait: time.Duration(waiters) * 5 * ms}}}
				s.Tasks = append(s.Tasks, snapshot.Task{ID: id, Class: class, Kind: task.Request, Cancellable: class == "q", Age: hold, N: 1})
				if c.reports && id != 1 {
					s.Tasks[0].Done, s.Tasks[0].Total = 1, 100
				}
				s.Usage = append(s.Usage, snapshot.Usage{Usage: task.Usage{Held: 1, Hold: hold}})
				for i := range waiters {
					s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(100 + i), Class: "w", Kind: task.Request, Cancellable: true,
						Blocked: true, Age: hold, First: int32(len(s.Usage)), N: 1})
					s.Usage = append(s.Usage, snapshot.Usage{Task: int32(len(s.Tasks) - 1), Usage: task.Usage{Waiting: 1, Wait: hold}})
				}
				return s
			}
			cancels := func(s *snapshot.Snapshot) []uint64 {
				a.Observe(s)
				return cancelsOf(a.Decide(s))
			}
			// Task 1 of class q holds the lock for long: cancelled.
			var got []uint64
			for i := range 10 {
				got = append(got, cancels(snap(1, "q", time.Duration(50+5*i)*ms, 3))...)
				if len(got) > 0 {
					break
				}
			}
			if len(got) != 1 || got[0] != 1 {
				t.Fatalf("cancelled %v; want the holder 1", got)
			}
			// Gone; task 2 holds now, the others still wait, for longer
			// than a judgement lasts (or until 2 is cancelled).
			got = got[:0]
			var ev Evaluation
			for i := range 240 {
				s := snap(2, c.next, time.Duration(5+5*i)*ms, 3)
				a.Observe(s)
				ev = a.Evaluate(s)
				if got = cancelsOf(a.Decide(s)); len(got) > 0 {
					break
				}
			}
			if (len(got) > 0) != c.decideOn {
				t.Errorf("cancelled %v; want a cancellation of 2: %v", got, c.decideOn)
			}
			if ev.Levels[0].Unrelieved != (c.refuted && !c.reports) {
				t.Errorf("level %+v: unrelieved %v; want %v", ev.Levels[0], ev.Levels[0].Unrelieved, c.refuted && !c.reports)
			}
			if !c.refuted && c.next != "q" {
				// While task 2's cancellation is judged, class q's next
				// holder waits for the judgement; another class's
				// culprit leaves class q's next holder to be decided on.
				got = got[:0]
				for i := range 10 {
					if got = cancels(snap(3, "q", time.Duration(50+5*i)*ms, 3)); len(got) > 0 {
						break
					}
				}
				if len(got) != 1 || got[0] != 3 {
					t.Errorf("cancelled %v; want the next holder of class q, 3", got)
				}
				return
			}
			if c.reports || !c.refuted {
				return
			}
			if len(ev.NoGainTasks) == 0 || !strings.HasPrefix(ev.NoGainTasks[0].Why, "refuted") {
				t.Errorf("left out %+v; want task 2 listed as refuted", ev.NoGainTasks)
			}
			// Nobody waits for a second: the refutation is over.
			for i := range 210 {
				a.Observe(snap(3, "q", time.Duration(5+5*i)*ms, 0))
			}
			if ev := a.Evaluate(snap(3, "q", time.Second, 3)); ev.Levels[0].Unrelieved {
				t.Errorf("still unrelieved after a quiet second: %+v", ev.Levels[0])
			}
		})
	}
}

// cancelsOf returns the tasks ds cancel.
func cancelsOf(ds []policy.Decision) (ids []uint64) {
	for _, d := range ds {
		if d.Action == policy.Cancel {
			ids = append(ids, d.Task)
		}
	}
	return ids
}

// A decision the controller did not act on (another cancellation too
// recent, a dry run) cancelled nothing: the task, still holding, is not
// refuted by its own hold, and is proposed again.
func TestJudgementIgnoresADecisionNotActedOn(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(10*ms))
	at := time.Duration(0)
	snap := func(hold time.Duration) *snapshot.Snapshot {
		at += 5 * ms
		return newBuilder(5*ms).res("table", resource.KindLock, 1, 0.5, 2).
			task(1, "q", true, 0, 0, hold, use{res: 0, held: 1, hold: hold}).
			task(2, "w", true, 0, 0, hold, use{res: 0, waiting: true}).
			task(3, "w", true, 0, 0, hold, use{res: 0, waiting: true}).build()
	}
	decided := 0
	for i := range 60 { // 0.3 s: shorter than a judgement lasts
		s := snap(time.Duration(50+5*i) * ms)
		s.At = at
		s.Tasks[1].Blocked, s.Tasks[2].Blocked = true, true
		a.Observe(s)
		for _, id := range cancelsOf(a.Decide(s)) {
			if id != 1 {
				t.Fatalf("cancelled %d; want the holder 1", id)
			}
			decided++
		}
	}
	if decided < 2 {
		t.Errorf("the holder was proposed %d time(s) in 0.3 s, never acted on; want it proposed again", decided)
	}
}

package taskx_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

func TestNewRegistryOwnClock(t *testing.T) {
	reg := task.NewRegistry(task.Options{})
	if reg.Now() < 1 {
		t.Fatalf("Now() = %d, want ≥ 1", reg.Now())
	}
	_, tk := reg.Begin(context.Background(), task.Spec{})
	if taskx.Started(tk) < 1 {
		t.Errorf("Started() = %d, want ≥ 1", taskx.Started(tk))
	}
	tk.End(nil)
}

func TestOnEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type ended struct {
			ID    uint64
			Now   int64
			Usage []task.Usage
		}
		var got []ended
		e := newEnv(t, task.Options{OnEnd: func(tk *task.Task, now int64, usage []task.Usage) {
			// OnEnd must not keep usage: copy it.
			got = append(got, ended{ID: tk.ID(), Now: now, Usage: slices.Clone(usage)})
		}})
		_, a := e.reg.Begin(context.Background(), task.Spec{})
		_, b := e.reg.Begin(context.Background(), task.Spec{})
		taskx.Acquire(a, 1, 2)
		taskx.WaitBegin(a, 2)
		e.sleep(3 * ms)
		taskx.Release(a, 1, 1)
		taskx.Evicted(a, 3, 4)
		e.sleep(2 * ms)
		a.End(nil)
		b.End(errors.New("failed"))
		a.End(nil) // not reported again

		want := []ended{
			{ID: a.ID(), Now: e.clk.Now(), Usage: []task.Usage{
				{Resource: 1, Held: 1, Hold: 5 * ms},
				{Resource: 2, Waiting: 1, Wait: 5 * ms, Waits: 1},
				{Resource: 3, Evictions: 4},
			}},
			{ID: b.ID(), Now: e.clk.Now()},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("OnEnd calls mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestTotals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, ok := e.reg.Begin(context.Background(), task.Spec{})
		_, failed := e.reg.Begin(context.Background(), task.Spec{})
		_, cancelled := e.reg.Begin(context.Background(), task.Spec{Cancellable: true})
		_, live := e.begin(t, task.Spec{})
		_ = live
		e.sleep(10 * ms)
		ok.End(nil)
		e.sleep(10 * ms)
		failed.End(errors.New("boom"))
		taskx.Cancel(cancelled, "")
		cancelled.End(nil)

		var tot task.Totals
		tot.Begun = 99 // TotalsInto overwrites
		tot.Latency.Record(time.Hour)
		e.reg.TotalsInto(&tot)
		type counts struct {
			Begun, Ended, Failed, LatencyCount uint64
			Exec                               time.Duration
		}
		got := counts{tot.Begun, tot.Ended, tot.Failed, tot.Latency.Count(), tot.Exec}
		want := counts{Begun: 4, Ended: 3, Failed: 2, LatencyCount: 3, Exec: 50 * ms}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Totals mismatch (-want +got):\n%s", diff)
		}
		if q := tot.Latency.Quantile(1); q < 20*ms || q > 23*ms {
			t.Errorf("latency max = %v, want about 20ms", q)
		}
	})
}

// TestBlockRecycling runs many Begin/End cycles across ticks of the fake
// clock, leaving every kind of accounting behind in the ended tasks, and
// checks that no new task ever sees any of it.
func TestBlockRecycling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		var live []*task.Task
		for round := range 40 {
			for i := range 50 {
				_, tk := e.reg.Begin(context.Background(), task.Spec{Cancellable: true})
				if got := taskx.AppendUsage(tk, nil, e.clk.Now()); len(got) != 0 {
					t.Fatalf("round %d: a new task has usage %+v", round, got)
				}
				if d, n := taskx.ProgressOf(tk); taskx.Claimed(tk) != 0 || taskx.Activities(tk) != 1 || d != 0 || n != 0 || !taskx.Active(tk) {
					t.Fatalf("round %d: a new task has Claimed %d, Activities %d, progress %d/%d",
						round, taskx.Claimed(tk), taskx.Activities(tk), d, n)
				}
				if got := taskx.ExecTime(tk, e.clk.Now()); got != 0 {
					t.Fatalf("round %d: a new task has ExecTime %v", round, got)
				}
				// The first acquisition of a fresh task holds exactly what
				// it took, since now.
				taskx.Acquire(tk, 1, 1)
				if u := usage(t, tk, 1); u != (task.Usage{Resource: 1, Held: 1}) {
					t.Fatalf("round %d: first Acquire gives %+v", round, u)
				}
				// Leave everything behind: holds, waits, evictions, an
				// overflow chunk for some, progress, frozen state.
				for id := task.ResourceID(2); id < task.ResourceID(2+(round+i)%12); id++ {
					taskx.Acquire(tk, id, int64(id))
					taskx.WaitBegin(tk, id)
					taskx.Evicted(tk, id, 1)
				}
				tk.Progress(int64(i), 100)
				if i%3 == 0 {
					tk.Freeze()
				}
				if i%5 == 0 {
					taskx.Cancel(tk, "")
				}
				live = append(live, tk)
			}
			// End most of the tasks, keep some across rounds.
			keep := live[:0]
			for j, tk := range live {
				if (j+round)%4 == 0 {
					keep = append(keep, tk)
				} else {
					tk.End(nil)
				}
			}
			live = keep
			e.sleep(time.Duration(1+round%3) * ms / 2)
		}
		for _, tk := range live {
			tk.End(nil)
		}
		if st := e.reg.Stats(); st.Live != 0 || st.BadEvents != 0 || st.LateEvents != 0 {
			t.Errorf("Stats() = %+v", st)
		}
	})
}

func TestCheckUnended(t *testing.T) {
	const grace = time.Second
	e := newEnv(t, task.Options{})
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, leaked := e.reg.Begin(parent, task.Spec{Class: "GET /x", Key: "k"})
	_, ended := e.reg.Begin(parent, task.Spec{})
	_, running := e.begin(t, task.Spec{})
	ended.End(nil)

	base := taskx.Started(leaked) + int64(time.Hour)
	if taskx.CheckUnended(e.reg, leaked, base, grace) {
		t.Error("reported a task whose context is not done")
	}
	cancel()
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{at: 0, want: false},                       // first seen done
		{at: grace - time.Nanosecond, want: false}, // within grace
		{at: grace, want: true},
		{at: 2 * grace, want: false}, // reported once
	}
	for _, s := range steps {
		now := base + int64(s.at)
		if got := taskx.CheckUnended(e.reg, leaked, now, grace); got != s.want {
			t.Errorf("CheckUnended(leaked, +%v) = %v, want %v", s.at, got, s.want)
		}
		if taskx.CheckUnended(e.reg, ended, now, grace) {
			t.Errorf("CheckUnended(ended, +%v) reported an ended task", s.at)
		}
		if taskx.CheckUnended(e.reg, running, now, 0) {
			t.Errorf("CheckUnended(running, +%v) reported a running task", s.at)
		}
	}
	if got := e.reg.Stats().Unended; got != 1 {
		t.Errorf("Stats().Unended = %d, want 1", got)
	}
	reps := e.reports.get()
	if len(reps) != 1 {
		t.Fatalf("Report got %v, want one error", reps)
	}
	var ue *task.UnendedError
	if !errors.As(reps[0], &ue) {
		t.Fatalf("Report got %T, want *UnendedError", reps[0])
	}
	want := &task.UnendedError{ID: leaked.ID(), Class: "GET /x", Key: "k", Age: time.Hour + grace}
	if diff := cmp.Diff(want, ue); diff != "" {
		t.Errorf("UnendedError mismatch (-want +got):\n%s", diff)
	}
	if msg := ue.Error(); !strings.HasPrefix(msg, "task: ") || !strings.Contains(msg, `"GET /x"`) {
		t.Errorf("Error() = %q", msg)
	}

	// Ending the reported task afterwards is fine, and then it is never
	// reported again.
	leaked.End(nil)
	if taskx.CheckUnended(e.reg, leaked, base+int64(10*grace), grace) {
		t.Error("reported an ended task")
	}
	var tot task.Totals
	e.reg.TotalsInto(&tot)
	if tot.Ended != 2 {
		t.Errorf("Totals.Ended = %d, want 2", tot.Ended)
	}
}

// TestCheckUnendedCancelledTask checks that a task the controller cancelled
// and the application never ended is reported too.
func TestCheckUnendedCancelledTask(t *testing.T) {
	e := newEnv(t, task.Options{})
	_, tk := e.begin(t, task.Spec{Cancellable: true})
	taskx.Cancel(tk, "")
	now := taskx.Started(tk) + 1
	if taskx.CheckUnended(e.reg, tk, now, 0) {
		t.Error("reported on first sight")
	}
	if !taskx.CheckUnended(e.reg, tk, now, 0) {
		t.Error("not reported after the grace period")
	}
}

// TestLiveTasksBounded: tasks begun on a context that never ends and
// never ended would stay live for ever; past MaxLive, Begin refuses new
// tasks (a nil task: the work runs untracked), counts and reports the
// refusals, and takes tasks again once some end.
func TestLiveTasksBounded(t *testing.T) {
	var reported []error
	reg := task.NewRegistry(task.Options{MaxLive: 1000, Report: func(err error) { reported = append(reported, err) }})
	var live []*task.Task
	refused := 0
	for range 5000 {
		ctx, tk := reg.Begin(context.Background(), task.Spec{Class: "leak"})
		if tk == nil {
			refused++
			if task.FromContext(ctx) != nil {
				t.Fatal("a refused Begin's context carries a task")
			}
			continue
		}
		live = append(live, tk)
	}
	st := reg.Stats()
	if st.Live < 1000 || st.Live > 1000+64 {
		t.Fatalf("%d live after 5,000 Begins without End, want the bound, 1,000 (up to a shard's rounding)", st.Live)
	}
	if st.Refused != int64(refused) || refused != 5000-st.Live {
		t.Errorf("Refused = %d, %d nil tasks, want %d", st.Refused, refused, 5000-st.Live)
	}
	if len(reported) == 0 || !errors.Is(reported[0], task.ErrTooManyTasks) || len(reported) > 16 {
		t.Errorf("reported %d errors (first %v), want a few wrapping ErrTooManyTasks", len(reported), reported)
	}
	for _, tk := range live {
		tk.End(nil)
	}
	if _, tk := reg.Begin(context.Background(), task.Spec{}); tk == nil {
		t.Error("Begin refused once the live tasks ended")
	} else {
		tk.End(nil)
	}
}

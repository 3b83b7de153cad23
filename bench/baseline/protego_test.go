package baseline_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/bench/baseline"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// The resources of the hand-built snapshots, by index.
const (
	lockA = iota // "table:orders", KindLock
	lockB        // "wal", KindLock
	slots        // "workers", KindQueue
	pool         // "buffer-pool", KindMemory
	cpu          // "cpu", KindCPU
)

var resources = []snapshot.Resource{
	lockA: {ID: 1, Name: "table:orders", Kind: resource.KindLock},
	lockB: {ID: 2, Name: "wal", Kind: resource.KindLock},
	slots: {ID: 3, Name: "workers", Kind: resource.KindQueue, Capacity: 4},
	pool:  {ID: 4, Name: "buffer-pool", Kind: resource.KindMemory},
	cpu:   {ID: 5, Name: "cpu", Kind: resource.KindCPU},
}

// tk describes a task of a hand-built snapshot.
type tk struct {
	id          uint64
	cancellable bool
	cancelled   bool
	use         []use
}

// use is what a task did with one resource.
type use struct {
	res     int
	waiting bool // waiting now
	held    int64
	wait    time.Duration
}

// waiting, waited and holding build uses.
func waiting(res int, d time.Duration) use { return use{res: res, waiting: true, wait: d} }
func waited(res int, d time.Duration) use  { return use{res: res, wait: d} }
func holding(res int, d time.Duration) use { return use{res: res, held: 1, wait: d} }

// build returns a snapshot of the tasks, with their usage grouped by task
// as the controller lays it out.
func build(tasks ...tk) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Resources: resources}
	for i, t := range tasks {
		st := snapshot.Task{
			ID:          t.id,
			Cancellable: t.cancellable,
			Cancelled:   t.cancelled,
			First:       int32(len(s.Usage)),
			N:           int32(len(t.use)),
		}
		for _, u := range t.use {
			var w int32
			if u.waiting {
				w = 1
			}
			s.Usage = append(s.Usage, snapshot.Usage{
				Usage: task.Usage{
					Resource: resources[u.res].ID,
					Waiting:  w,
					Held:     u.held,
					Wait:     u.wait,
					Waits:    1,
				},
				Task: int32(i),
				Res:  int32(u.res),
			})
		}
		s.Tasks = append(s.Tasks, st)
	}
	return s
}

const ms = time.Millisecond

// decision is the part of a policy.Decision the tables check; the reason
// is checked separately.
type decision struct {
	Task    uint64
	Details map[string]string
}

func summarize(ds []policy.Decision) []decision {
	var out []decision
	for _, d := range ds {
		det := map[string]string{}
		for _, a := range d.Details {
			det[a.Key] = a.Value.String()
		}
		out = append(out, decision{Task: d.Task, Details: det})
	}
	return out
}

func details(wait, lock, queue time.Duration, on string) map[string]string {
	return map[string]string{
		"wait":       wait.String(),
		"lock_wait":  lock.String(),
		"queue_wait": queue.String(),
		"budget":     (50 * ms).String(),
		"waiting_on": on,
	}
}

func TestProtegoDecide(t *testing.T) {
	tests := []struct {
		name string
		opts []baseline.ProtegoOption
		snap *snapshot.Snapshot
		want []decision
	}{
		{
			name: "empty snapshot",
			snap: &snapshot.Snapshot{},
		},
		{
			name: "a waiter at its budget is dropped, one below is not",
			snap: build(
				tk{id: 1, cancellable: true, use: []use{waiting(lockA, 50*ms)}},
				tk{id: 2, cancellable: true, use: []use{waiting(lockA, 49*ms)}},
			),
			want: []decision{{Task: 1, Details: details(50*ms, 50*ms, 0, "table:orders")}},
		},
		{
			name: "the budget is per lock: earlier waits elsewhere do not add up",
			snap: build(
				tk{id: 7, cancellable: true, use: []use{
					waited(slots, 20*ms),
					waited(lockB, 10*ms),
					waiting(lockA, 25*ms),
				}},
				tk{id: 8, cancellable: true, use: []use{
					waited(slots, 20*ms),
					waiting(lockA, 55*ms),
				}},
			),
			want: []decision{{Task: 8, Details: details(55*ms, 55*ms, 20*ms, "table:orders")}},
		},
		{
			name: "waiting for a worker slot",
			snap: build(
				tk{id: 3, cancellable: true, use: []use{waiting(slots, 60*ms)}},
			),
			want: []decision{{Task: 3, Details: details(60*ms, 0, 60*ms, "workers")}},
		},
		{
			name: "memory and CPU waits do not count",
			snap: build(
				tk{id: 4, cancellable: true, use: []use{
					waiting(lockA, 30*ms),
					waited(pool, 500*ms),
					waited(cpu, 500*ms),
				}},
			),
		},
		{
			name: "waiting on memory only is not waiting on a lock or queue",
			snap: build(
				tk{id: 5, cancellable: true, use: []use{
					waited(lockA, 80*ms),
					waiting(pool, 80*ms),
				}},
			),
		},
		{
			name: "a holder that waits for nothing is never dropped",
			snap: build(
				tk{id: 1, cancellable: true, use: []use{holding(lockA, 300*ms)}},
				tk{id: 2, cancellable: true, use: []use{waiting(lockA, 70*ms)}},
			),
			want: []decision{{Task: 2, Details: details(70*ms, 70*ms, 0, "table:orders")}},
		},
		{
			name: "a task holding one lock and waiting for another is a victim",
			snap: build(
				tk{id: 1, cancellable: true, use: []use{holding(lockB, 0), waiting(lockA, 50*ms)}},
			),
			want: []decision{{Task: 1, Details: details(50*ms, 50*ms, 0, "table:orders")}},
		},
		{
			name: "only cancellable, not yet cancelled tasks",
			snap: build(
				tk{id: 1, use: []use{waiting(lockA, 90*ms)}},
				tk{id: 2, cancellable: true, cancelled: true, use: []use{waiting(lockA, 90*ms)}},
				tk{id: 3, cancellable: true, use: []use{waiting(lockA, 90*ms)}},
			),
			want: []decision{{Task: 3, Details: details(90*ms, 90*ms, 0, "table:orders")}},
		},
		{
			name: "in order of task ID",
			snap: build(
				tk{id: 30, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
				tk{id: 10, cancellable: true, use: []use{waiting(slots, 60*ms)}},
				tk{id: 20, cancellable: true, use: []use{waiting(lockB, 60*ms)}},
			),
			want: []decision{
				{Task: 10, Details: details(60*ms, 0, 60*ms, "workers")},
				{Task: 20, Details: details(60*ms, 60*ms, 0, "wal")},
				{Task: 30, Details: details(60*ms, 60*ms, 0, "table:orders")},
			},
		},
		{
			name: "capped, lowest IDs first",
			opts: []baseline.ProtegoOption{baseline.WithProtegoMaxDrops(2)},
			snap: build(
				tk{id: 30, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
				tk{id: 10, cancellable: true, use: []use{waiting(slots, 60*ms)}},
				tk{id: 20, cancellable: true, use: []use{waiting(lockB, 60*ms)}},
			),
			want: []decision{
				{Task: 10, Details: details(60*ms, 0, 60*ms, "workers")},
				{Task: 20, Details: details(60*ms, 60*ms, 0, "wal")},
			},
		},
		{
			name: "a cap of zero means no cap",
			opts: []baseline.ProtegoOption{baseline.WithProtegoMaxDrops(0)},
			snap: build(
				tk{id: 1, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
				tk{id: 2, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
			),
			want: []decision{
				{Task: 1, Details: details(60*ms, 60*ms, 0, "table:orders")},
				{Task: 2, Details: details(60*ms, 60*ms, 0, "table:orders")},
			},
		},
		{
			name: "usage pointing outside the snapshot is ignored",
			snap: func() *snapshot.Snapshot {
				s := build(
					tk{id: 1, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
					tk{id: 2, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
				)
				s.Usage[0].Res = 99
				s.Tasks[1].N = 5
				return s
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := baseline.NewProtego(50*ms, tt.opts...)
			got := p.Decide(tt.snap)
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
			}
			for _, d := range got {
				if d.Policy != "protego" || d.Action != policy.Cancel || d.Reason == "" {
					t.Errorf("decision %+v: want policy protego, action cancel and a reason", d)
				}
			}
		})
	}
}

// TestProtegoNeverProposesHoldersOrProtectedTasks builds snapshots with
// every combination of the task properties that matter and checks that no
// decision names a task that is not waiting on a lock or queue, not
// cancellable, or already cancelled, and that every task that qualifies is
// named.
func TestProtegoNeverProposesHoldersOrProtectedTasks(t *testing.T) {
	var tasks []tk
	qualifies := map[uint64]bool{}
	id := uint64(0)
	for _, cancellable := range []bool{false, true} {
		for _, cancelled := range []bool{false, true} {
			for _, res := range []int{lockA, slots, pool, cpu} {
				for _, isWaiting := range []bool{false, true} {
					for _, holds := range []bool{false, true} {
						for _, w := range []time.Duration{0, 49 * ms, 50 * ms, time.Second} {
							id++
							u := use{res: res, waiting: isWaiting, wait: w}
							if holds {
								u.held = 1
							}
							tasks = append(tasks, tk{id: id, cancellable: cancellable, cancelled: cancelled, use: []use{u}})
							kind := resources[res].Kind
							qualifies[id] = cancellable && !cancelled && isWaiting && w >= 50*ms &&
								(kind == resource.KindLock || kind == resource.KindQueue)
						}
					}
				}
			}
		}
	}
	s := build(tasks...)
	got := baseline.NewProtego(50 * ms).Decide(s)
	seen := map[uint64]bool{}
	for _, d := range got {
		i := s.TaskByID(d.Task)
		if i < 0 {
			t.Fatalf("decision for unknown task %d", d.Task)
		}
		st := &s.Tasks[i]
		u := s.UsageOf(i)[0]
		if !st.Cancellable || st.Cancelled || u.Waiting == 0 {
			t.Errorf("task %d proposed: cancellable %v, cancelled %v, waiting %d, held %d",
				d.Task, st.Cancellable, st.Cancelled, u.Waiting, u.Held)
		}
		seen[d.Task] = true
	}
	for id, q := range qualifies {
		if q != seen[id] {
			t.Errorf("task %d: proposed %v, want %v", id, seen[id], q)
		}
	}
}

func TestProtegoDoesNotModifySnapshot(t *testing.T) {
	s := build(
		tk{id: 2, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
		tk{id: 1, cancellable: true, use: []use{waited(slots, 10*ms), waiting(lockB, 60*ms)}},
	)
	before := build(
		tk{id: 2, cancellable: true, use: []use{waiting(lockA, 60*ms)}},
		tk{id: 1, cancellable: true, use: []use{waited(slots, 10*ms), waiting(lockB, 60*ms)}},
	)
	if got := baseline.NewProtego(50 * ms).Decide(s); len(got) != 2 {
		t.Fatalf("Decide() = %d decisions, want 2", len(got))
	}
	type parts struct {
		Tasks     []snapshot.Task
		Resources []snapshot.Resource
		Usage     []snapshot.Usage
	}
	if diff := cmp.Diff(parts{before.Tasks, before.Resources, before.Usage}, parts{s.Tasks, s.Resources, s.Usage}); diff != "" {
		t.Errorf("Decide modified the snapshot (-before +after):\n%s", diff)
	}
}

func TestNewProtegoPanicsOnNonPositiveBudget(t *testing.T) {
	for _, b := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewProtego(%v) did not panic", b)
				}
			}()
			baseline.NewProtego(b)
		}()
	}
}

func TestProtegoName(t *testing.T) {
	p := baseline.NewProtego(time.Second)
	if p.Name() != "protego" || p.Budget() != time.Second {
		t.Errorf("Name() = %q, Budget() = %v", p.Name(), p.Budget())
	}
}

// step is one snapshot of a task's use of lockA: its waits begun, its
// accumulated wait, and whether it waits now.
type step struct {
	waits   int64
	wait    time.Duration
	waiting bool
}

func snapAt(id uint64, st step) *snapshot.Snapshot {
	u := waited(lockA, st.wait)
	u.waiting = st.waiting
	s := build(tk{id: id, cancellable: true, use: []use{u}})
	s.Usage[0].Waits = st.waits
	return s
}

// TestProtegoWaitInProgress checks, over successive snapshots, that only
// the wait in progress at a lock counts against the budget: a task that
// queues briefly again and again (as a background job taking a lock
// between batches does) is never dropped, however much its waits add up
// to, and one wait over the budget is.
func TestProtegoWaitInProgress(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
		drop  []bool // after each step
	}{
		{"short waits adding up past the budget", []step{
			{1, 20 * ms, true}, {1, 30 * ms, false}, {2, 45 * ms, true}, {2, 60 * ms, false},
			{3, 75 * ms, true}, {3, 90 * ms, false}, {4, 120 * ms, true},
		}, []bool{false, false, false, false, false, false, false}},
		{"one wait past the budget after short ones", []step{
			{1, 30 * ms, false}, {2, 40 * ms, true}, {2, 79 * ms, true}, {2, 80 * ms, true},
		}, []bool{false, false, false, true}},
		{"waits begun and ended between two snapshots", []step{
			{1, 10 * ms, false}, {3, 40 * ms, true}, {3, 60 * ms, true},
		}, []bool{false, false, true}},
		{"first seen in its first wait", []step{{1, 50 * ms, true}}, []bool{true}},
		{"first seen in a later wait: earlier waits taken as long as the mean", []step{
			{3, 90 * ms, true}, {3, 110 * ms, true},
		}, []bool{false, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := baseline.NewProtego(50 * ms)
			for i, st := range c.steps {
				got := len(p.Decide(snapAt(9, st))) > 0
				if got != c.drop[i] {
					t.Errorf("step %d (%+v): dropped %v, want %v", i, st, got, c.drop[i])
				}
			}
		})
	}
}

package taskx_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

const ms = time.Millisecond

// TestAccounting runs scripts of events on one task inside a bubble and
// compares the accounting, read after the script, with the expected one.
func TestAccounting(t *testing.T) {
	type step struct {
		op      string // acquire, release, waitBegin, waitEnd, evicted, sleep
		res     task.ResourceID
		n       int64
		d       time.Duration
		wantErr error
	}
	tests := []struct {
		name    string
		steps   []step
		want    []task.Usage
		wantBad int64
	}{
		{
			name: "hold in progress",
			steps: []step{
				{op: "acquire", res: 1, n: 2},
				{op: "sleep", d: 3 * ms},
			},
			want: []task.Usage{{Resource: 1, Held: 2, Hold: 3 * ms}},
		},
		{
			name: "finished and current holds",
			steps: []step{
				{op: "acquire", res: 1, n: 1},
				{op: "sleep", d: 2 * ms},
				{op: "acquire", res: 1, n: 3},
				{op: "sleep", d: 1 * ms},
				{op: "release", res: 1, n: 4},
				{op: "sleep", d: 10 * ms}, // holding nothing: not counted
				{op: "acquire", res: 1, n: 1},
				{op: "sleep", d: 5 * ms},
			},
			want: []task.Usage{{Resource: 1, Held: 1, Hold: 8 * ms}},
		},
		{
			name: "wait in progress and finished",
			steps: []step{
				{op: "waitBegin", res: 3},
				{op: "sleep", d: 4 * ms},
				{op: "waitEnd", res: 3},
				{op: "sleep", d: 1 * ms},
				{op: "waitBegin", res: 3},
				{op: "sleep", d: 2 * ms},
			},
			want: []task.Usage{{Resource: 3, Waiting: 1, Wait: 6 * ms, Waits: 2}},
		},
		{
			name: "overlapping waits count once in time",
			steps: []step{
				{op: "waitBegin", res: 3},
				{op: "sleep", d: 1 * ms},
				{op: "waitBegin", res: 3},
				{op: "sleep", d: 2 * ms},
				{op: "waitEnd", res: 3},
				{op: "sleep", d: 3 * ms},
				{op: "waitEnd", res: 3},
				{op: "sleep", d: 3 * ms},
			},
			want: []task.Usage{{Resource: 3, Wait: 6 * ms, Waits: 2}},
		},
		{
			name: "wait then hold, evictions",
			steps: []step{
				{op: "waitBegin", res: 2},
				{op: "sleep", d: 1 * ms},
				{op: "waitEnd", res: 2},
				{op: "acquire", res: 2, n: 1},
				{op: "evicted", res: 2, n: 5},
				{op: "evicted", res: 2, n: 0},
				{op: "evicted", res: 2, n: -2},
				{op: "sleep", d: 2 * ms},
				{op: "release", res: 2, n: 1},
			},
			want: []task.Usage{{Resource: 2, Hold: 2 * ms, Wait: 1 * ms, Waits: 1, Evictions: 5}},
		},
		{
			name: "order of first touch",
			steps: []step{
				{op: "evicted", res: 9, n: 1},
				{op: "acquire", res: 4, n: 1},
				{op: "waitBegin", res: 7},
				{op: "acquire", res: 9, n: 1},
			},
			want: []task.Usage{{Resource: 9, Held: 1, Evictions: 1}, {Resource: 4, Held: 1}, {Resource: 7, Waiting: 1, Waits: 1}},
		},
		{
			name: "non-positive units touch nothing",
			steps: []step{
				{op: "acquire", res: 1, n: 0},
				{op: "acquire", res: 1, n: -1},
				{op: "release", res: 1, n: 0},
				{op: "release", res: 1, n: -5},
			},
			want: nil,
		},
		{
			name: "over-release changes nothing",
			steps: []step{
				{op: "acquire", res: 1, n: 2},
				{op: "sleep", d: 1 * ms},
				{op: "release", res: 1, n: 3, wantErr: task.ErrOverRelease},
				{op: "release", res: 5, n: 1, wantErr: task.ErrOverRelease},
				{op: "release", res: 1, n: task.MaxUnits + 1, wantErr: task.ErrOverRelease},
				{op: "sleep", d: 1 * ms},
			},
			want:    []task.Usage{{Resource: 1, Held: 2, Hold: 2 * ms}, {Resource: 5}},
			wantBad: 3,
		},
		{
			name: "WaitEnd without WaitBegin",
			steps: []step{
				{op: "waitEnd", res: 6},
				{op: "waitBegin", res: 6},
				{op: "waitEnd", res: 6},
				{op: "waitEnd", res: 6},
			},
			want:    []task.Usage{{Resource: 6, Waits: 1}},
			wantBad: 2,
		},
		{
			name: "too many units",
			steps: []step{
				{op: "acquire", res: 1, n: task.MaxUnits + 1, wantErr: task.ErrTooManyUnits},
				{op: "acquire", res: 1, n: task.MaxUnits},
				{op: "acquire", res: 1, n: 1, wantErr: task.ErrTooManyUnits},
				{op: "release", res: 1, n: task.MaxUnits},
				{op: "acquire", res: 1, n: 1},
			},
			want:    []task.Usage{{Resource: 1, Held: 1}},
			wantBad: 2,
		},
		{
			name: "more resources than fit inline",
			steps: func() []step {
				var s []step
				for id := task.ResourceID(1); id <= 20; id++ {
					s = append(s, step{op: "acquire", res: id, n: int64(id)})
				}
				s = append(s, step{op: "sleep", d: ms})
				for id := task.ResourceID(1); id <= 20; id += 2 {
					s = append(s, step{op: "release", res: id, n: int64(id)})
				}
				return s
			}(),
			want: func() []task.Usage {
				var u []task.Usage
				for id := task.ResourceID(1); id <= 20; id++ {
					if id%2 == 1 {
						u = append(u, task.Usage{Resource: id, Hold: ms})
					} else {
						u = append(u, task.Usage{Resource: id, Held: int64(id), Hold: ms})
					}
				}
				return u
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, task.Options{})
				_, tk := e.begin(t, task.Spec{})
				for i, s := range tt.steps {
					var err error
					switch s.op {
					case "acquire":
						err = taskx.Acquire(tk, s.res, s.n)
					case "release":
						err = taskx.Release(tk, s.res, s.n)
					case "waitBegin":
						taskx.WaitBegin(tk, s.res)
					case "waitEnd":
						taskx.WaitEnd(tk, s.res)
					case "evicted":
						taskx.Evicted(tk, s.res, s.n)
					case "sleep":
						e.sleep(s.d)
					default:
						t.Fatalf("step %d: unknown op %q", i, s.op)
					}
					if !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
						t.Errorf("step %d (%s %d %d): error %v, want %v", i, s.op, s.res, s.n, err, s.wantErr)
					}
				}

				got := taskx.AppendUsage(tk, nil, e.clk.Now())
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("AppendUsage mismatch (-want +got):\n%s", diff)
				}
				var each []task.Usage
				taskx.EachUsage(tk, e.clk.Now(), func(u task.Usage) { each = append(each, u) })
				if diff := cmp.Diff(got, each); diff != "" {
					t.Errorf("EachUsage differs from AppendUsage (-AppendUsage +EachUsage):\n%s", diff)
				}
				if got := taskx.Claimed(tk); got != len(tt.want) {
					t.Errorf("Claimed() = %d, want %d", got, len(tt.want))
				}
				for _, w := range tt.want {
					if u := usage(t, tk, w.Resource); u != w {
						t.Errorf("Usage(%d) = %+v, want %+v", w.Resource, u, w)
					}
				}
				if _, ok := taskx.UsageOf(tk, 1000); ok {
					t.Error("Usage of an untouched resource found")
				}
				if got := e.reg.Stats().BadEvents; got != tt.wantBad {
					t.Errorf("Stats().BadEvents = %d, want %d", got, tt.wantBad)
				}
				// AppendUsage appends.
				prefix := []task.Usage{{Resource: 99}}
				if got := taskx.AppendUsage(tk, prefix, e.clk.Now()); len(got) != 1+len(tt.want) || got[0].Resource != 99 {
					t.Errorf("AppendUsage(prefix) = %+v, want the prefix kept", got)
				}
			})
		})
	}
}

// TestAccountingReadAt checks that AppendUsage reads durations in progress
// at the time it is given.
func TestAccountingReadAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{})
		taskx.Acquire(tk, 1, 1)
		taskx.WaitBegin(tk, 2)
		start := e.clk.Now()
		e.sleep(5 * ms)
		got := taskx.AppendUsage(tk, nil, start+int64(2*ms))
		want := []task.Usage{{Resource: 1, Held: 1, Hold: 2 * ms}, {Resource: 2, Waiting: 1, Wait: 2 * ms, Waits: 1}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("AppendUsage(start+2ms) mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestLateEvents(t *testing.T) {
	e := newEnv(t, task.Options{})
	_, tk := e.reg.Begin(context.Background(), task.Spec{})
	taskx.Acquire(tk, 1, 1)
	tk.End(nil)

	if err := taskx.Acquire(tk, 1, 1); err != nil {
		t.Errorf("Acquire after End = %v, want nil (dropped)", err)
	}
	if err := taskx.Release(tk, 1, 1); err != nil {
		t.Errorf("Release after End = %v, want nil (dropped)", err)
	}
	taskx.WaitBegin(tk, 2)
	taskx.WaitEnd(tk, 2)
	taskx.Evicted(tk, 3, 1)
	taskx.Acquire(tk, 1, 0) // no event at all
	if diff := cmp.Diff(task.Stats{LateEvents: 5}, e.reg.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
	if u, ok := taskx.UsageOf(tk, 1); ok {
		t.Errorf("Usage after End = %+v, found", u)
	}
	if got := taskx.AppendUsage(tk, nil, 1); len(got) != 0 {
		t.Errorf("AppendUsage after End = %+v", got)
	}
	if got := taskx.Claimed(tk); got != 0 {
		t.Errorf("Claimed() after End = %d", got)
	}
}

// TestAccountingConcurrent has many goroutines of one task emit events at
// once (run it with -race) and checks the totals.
func TestAccountingConcurrent(t *testing.T) {
	const goroutines, rounds, resources = 8, 300, 12
	e := newEnv(t, task.Options{})
	_, tk := e.begin(t, task.Spec{})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				id := task.ResourceID(1 + rng.IntN(resources))
				n := int64(1 + rng.IntN(3))
				taskx.WaitBegin(tk, id)
				taskx.WaitEnd(tk, id)
				if err := taskx.Acquire(tk, id, n); err != nil {
					t.Errorf("Acquire: %v", err)
				}
				taskx.Evicted(tk, id, 1)
				if err := taskx.Release(tk, id, n); err != nil {
					t.Errorf("Release: %v", err)
				}
				_ = taskx.AppendUsage(tk, nil, e.clk.Now())
			}
			// Keep one unit of each resource.
			for id := task.ResourceID(1); id <= resources; id++ {
				taskx.Acquire(tk, id, 1)
			}
		})
	}
	close(start)
	wg.Wait()

	us := taskx.AppendUsage(tk, nil, e.clk.Now())
	if len(us) != resources || taskx.Claimed(tk) != resources {
		t.Fatalf("%d usages, Claimed %d; want %d each: %+v", len(us), taskx.Claimed(tk), resources, us)
	}
	seen := make(map[task.ResourceID]bool)
	var waits, evictions int64
	for _, u := range us {
		if seen[u.Resource] || u.Resource < 1 || u.Resource > resources {
			t.Errorf("resource %d repeated or unknown", u.Resource)
		}
		seen[u.Resource] = true
		if u.Held != goroutines || u.Waiting != 0 {
			t.Errorf("resource %d: Held %d Waiting %d, want %d 0", u.Resource, u.Held, u.Waiting, goroutines)
		}
		if u.Hold < 0 || u.Wait < 0 || u.Hold > time.Hour || u.Wait > time.Hour {
			t.Errorf("resource %d: Hold %v Wait %v out of range", u.Resource, u.Hold, u.Wait)
		}
		waits += u.Waits
		evictions += u.Evictions
	}
	if waits != goroutines*rounds || evictions != goroutines*rounds {
		t.Errorf("waits %d evictions %d, want %d each", waits, evictions, goroutines*rounds)
	}
	if got := e.reg.Stats().BadEvents; got != 0 {
		t.Errorf("Stats().BadEvents = %d", got)
	}
}

// FuzzAccounting drives a random sequence of events on one task, inside a
// bubble, and compares the accounting with a model after every event.
func FuzzAccounting(f *testing.F) {
	f.Add([]byte{0x00, 0x09, 0x12, 0x1b, 0x24, 0x2d, 0x36, 0x3f})
	f.Add([]byte{0x03, 0x03, 0x03, 0x0a, 0x0a, 0x0b, 0x7f, 0x80, 0xff})
	f.Add([]byte("acquire release wait evict sleep end"))
	f.Add([]byte{0x01, 0x03, 0x00, 0xfe, 0x01, 0x03, 0x03, 0x0c, 0x05, 0x02})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 512 {
			script = script[:512]
		}
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, task.Options{})
			_, tk := e.reg.Begin(context.Background(), task.Spec{})
			m := newModel()
			ended := false
			var late int64
			for i := 0; i < len(script); i++ {
				b := script[i]
				op, id := b&7, task.ResourceID(1+(b>>3)%12)
				n := int64(1)
				if i+1 < len(script) && (op == 1 || op == 2 || op == 5) {
					i++
					n = int64(script[i]%8) - 1 // -1 … 6
				}
				// An event after End is counted if it would have touched the
				// accounting: WaitBegin, WaitEnd, and the others with n > 0.
				if ended && (op == 3 || op == 4 || (op == 1 || op == 2 || op == 5) && n > 0) {
					late++
				}
				switch op {
				case 0:
					e.sleep(time.Duration(1+b>>3) * 100 * time.Microsecond)
					m.advance(time.Duration(1+b>>3) * 100 * time.Microsecond)
				case 1:
					err := taskx.Acquire(tk, id, n)
					if !ended {
						if wantErr := m.acquire(id, n); !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
							t.Fatalf("event %d: Acquire(%d, %d) = %v, want %v", i, id, n, err, wantErr)
						}
					}
				case 2:
					err := taskx.Release(tk, id, n)
					if !ended {
						if wantErr := m.release(id, n); !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
							t.Fatalf("event %d: Release(%d, %d) = %v, want %v", i, id, n, err, wantErr)
						}
					}
				case 3:
					taskx.WaitBegin(tk, id)
					if !ended {
						m.waitBegin(id)
					}
				case 4:
					taskx.WaitEnd(tk, id)
					if !ended {
						m.waitEnd(id)
					}
				case 5:
					taskx.Evicted(tk, id, n)
					if !ended {
						m.evicted(id, n)
					}
				case 6:
					if b == 0xfe {
						tk.End(nil)
						ended = true
					}
				case 7:
					// Read only.
				}
				got := taskx.AppendUsage(tk, nil, e.clk.Now())
				want := m.usage()
				if ended {
					want = nil
				}
				if !slices.Equal(want, got) {
					t.Fatalf("after event %d (%#x): usage mismatch (-model +task):\n%s", i, b, cmp.Diff(want, got))
				}
				for _, u := range got {
					if u.Held < 0 || u.Waiting < 0 || u.Hold < 0 || u.Wait < 0 || u.Waits < 0 || u.Evictions < 0 {
						t.Fatalf("after event %d: negative usage %+v", i, u)
					}
				}
				st := e.reg.Stats()
				if st.BadEvents != m.bad || st.LateEvents != late {
					t.Fatalf("after event %d: BadEvents %d LateEvents %d, want %d %d", i, st.BadEvents, st.LateEvents, m.bad, late)
				}
			}
			tk.End(nil)
		})
	})
}

// model is the obvious, locked accounting of one task.
type model struct {
	order []task.ResourceID
	res   map[task.ResourceID]*task.Usage
	bad   int64
}

func newModel() *model { return &model{res: make(map[task.ResourceID]*task.Usage)} }

func (m *model) touch(id task.ResourceID) *task.Usage {
	u, ok := m.res[id]
	if !ok {
		u = &task.Usage{Resource: id}
		m.res[id] = u
		m.order = append(m.order, id)
	}
	return u
}

func (m *model) advance(d time.Duration) {
	for _, u := range m.res {
		if u.Held > 0 {
			u.Hold += d
		}
		if u.Waiting > 0 {
			u.Wait += d
		}
	}
}

func (m *model) acquire(id task.ResourceID, n int64) error {
	if n <= 0 {
		return nil
	}
	u := m.touch(id)
	if u.Held+n > task.MaxUnits {
		m.bad++
		return task.ErrTooManyUnits
	}
	u.Held += n
	return nil
}

func (m *model) release(id task.ResourceID, n int64) error {
	if n <= 0 {
		return nil
	}
	u := m.touch(id)
	if n > u.Held {
		m.bad++
		return task.ErrOverRelease
	}
	u.Held -= n
	return nil
}

func (m *model) waitBegin(id task.ResourceID) {
	u := m.touch(id)
	u.Waiting++
	u.Waits++
}

func (m *model) waitEnd(id task.ResourceID) {
	u := m.touch(id)
	if u.Waiting == 0 {
		m.bad++
		return
	}
	u.Waiting--
}

func (m *model) evicted(id task.ResourceID, n int64) {
	if n > 0 {
		m.touch(id).Evictions += n
	}
}

func (m *model) usage() []task.Usage {
	var us []task.Usage
	for _, id := range m.order {
		us = append(us, *m.res[id])
	}
	return us
}

// TestAppendUsageBeforeEvent reads a task's accounting at a clock value
// taken before an Acquire and a WaitBegin that another goroutine makes while
// the controller builds its snapshot (the controller reads the clock once,
// then visits the tasks; the coarse clock may advance meanwhile, and in
// precise mode every event reads the clock afresh). A hold that began after
// the reading time has lasted nothing at that time.
//
// BUG: slot.read (usage.go, since) computes now−start modulo 2⁴⁰ µs, so a
// start later than now reads as a hold of about 12.7 days.
func TestAppendUsageBeforeEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.New()
		reg := taskx.NewRegistry(clk, task.Options{})
		_, tk := reg.Begin(context.Background(), task.Spec{})
		defer tk.End(nil)

		snapshotAt := clk.Now() // the controller reads the clock
		time.Sleep(ms)
		clk.Advance() // a tick
		taskx.Acquire(tk, 1, 1)
		taskx.WaitBegin(tk, 2)

		got := taskx.AppendUsage(tk, nil, snapshotAt) // ... and visits the task
		for _, u := range got {
			if u.Hold > ms || u.Wait > ms {
				t.Errorf("resource %d read at a time before its hold/wait began: Hold %v, Wait %v; want 0",
					u.Resource, u.Hold, u.Wait)
			}
		}
	})
}

// TestReadSlotsAgreesWithEachUsage checks, on seeded tasks that touch up
// to 40 resources (past the inline slots, into several chunks), that
// ReadSlots stores the entries EachUsage reports, in its order, cut at
// the length of dst.
func TestReadSlotsAgreesWithEachUsage(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		reg := taskx.NewRegistry(clock.New(), taskx.Options{})
		_, tk := reg.Begin(context.Background(), taskx.Spec{})
		for range 1 + rng.IntN(40) {
			id := task.ResourceID(1 + rng.IntN(60))
			if rng.IntN(2) == 0 {
				taskx.Acquire(tk, id, 1+rng.Int64N(5))
			} else {
				taskx.Evicted(tk, id, 1+rng.Int64N(5))
			}
		}
		now := taskx.Clock(reg).Now()
		var all []task.Usage
		taskx.EachUsage(tk, now, func(u task.Usage) { all = append(all, u) })
		for m := range len(all) + 3 {
			dst := make([]task.Usage, m)
			n := taskx.ReadSlots(tk, dst, now)
			want := all[:min(m, len(all))]
			if diff := cmp.Diff(want, dst[:n]); diff != "" {
				t.Fatalf("seed %d, dst of %d: ReadSlots differs from EachUsage (-want +got):\n%s", seed, m, diff)
			}
		}
		tk.End(nil)
	}
}

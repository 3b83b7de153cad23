package penalty_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

const ms = time.Millisecond

// scene is a snapshot of one lock: a holder (task 1) and waiters.
type scene struct {
	holderExec, holderHold time.Duration
	holderPenalty          time.Duration
	holderCancelled        bool
	// holderWait is how long the holder itself waited for the lock.
	holderWait  time.Duration
	holderClass string // "noisy" if empty
	victims     []victim
}

type victim struct {
	exec, wait time.Duration
	goal       float64
	class      string // "light" if empty
}

func (sc scene) snapshot() *snapshot.Snapshot {
	s := &snapshot.Snapshot{Resources: []snapshot.Resource{{ID: 1, Name: "table", Kind: resource.KindLock}}}
	hc := sc.holderClass
	if hc == "" {
		hc = "noisy"
	}
	s.Tasks = append(s.Tasks, snapshot.Task{ID: 1, Class: hc, Goal: 0.5, Exec: sc.holderExec, Penalty: sc.holderPenalty, Cancelled: sc.holderCancelled, First: 0, N: 1})
	s.Usage = append(s.Usage, snapshot.Usage{Usage: task.Usage{Resource: 1, Held: 1, Hold: sc.holderHold, Wait: sc.holderWait}, Task: 0, Res: 0})
	for i, v := range sc.victims {
		goal := v.goal
		if goal == 0 {
			goal = 0.5
		}
		class := v.class
		if class == "" {
			class = "light"
		}
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(i + 2), Class: class, Goal: goal, Exec: v.exec, First: int32(i + 1), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Usage: task.Usage{Resource: 1, Waiting: 1, Wait: v.wait}, Task: int32(i + 1), Res: 0})
	}
	return s
}

func TestDetection(t *testing.T) {
	// p1 = sqrt(t_d(victim) · t_e(noisy)) − t_e(noisy)
	p1 := time.Duration(math.Sqrt(float64(90*ms)*float64(10*ms))) - 10*ms
	tests := []struct {
		name string
		sc   scene
		want []time.Duration // penalties of task 1, in order
	}{
		{"victim beyond its goal", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}, []time.Duration{p1}},
		{"victim within its goal", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: 100 * ms, wait: 30 * ms}}}, nil},
		{"victim with a lax goal", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: 100 * ms, wait: 9 * ms, goal: 20}}}, nil},
		{"holder came after the wait began", scene{holderExec: 10 * ms, holderHold: 3 * ms,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}, nil},
		{"penalty already pending", scene{holderExec: 10 * ms, holderHold: 100 * ms, holderPenalty: ms,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}, nil},
		{"cancelled holder", scene{holderExec: 10 * ms, holderHold: 100 * ms, holderCancelled: true,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}, nil},
		{"wait at the clock's resolution", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: ms, wait: ms}}}, nil},
		{"one penalty for many victims", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}, {exec: 50 * ms, wait: 40 * ms}}}, []time.Duration{p1}},
		// A noisy request of a stream waited for the lock behind its
		// peers before it took it: it is beyond its own goal, and noisy
		// all the same.
		{"holder deferred by its peers", scene{holderExec: 110 * ms, holderHold: 20 * ms, holderWait: 90 * ms,
			victims: []victim{{exec: 15 * ms, wait: 15 * ms}}}, []time.Duration{penalty.DefaultMinPenalty}},
		{"waiter of the holder's class", scene{holderExec: 10 * ms, holderHold: 100 * ms,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms, class: "noisy"}}}, nil},
		{"long runner: minimum penalty", scene{holderExec: time.Second, holderHold: time.Second,
			victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}, []time.Duration{penalty.DefaultMinPenalty}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := penalty.New().Decide(tt.sc.snapshot())
			var got []time.Duration
			for _, d := range ds {
				if d.Action != policy.Penalize || d.Task != 1 || d.Reason == "" {
					t.Fatalf("unexpected decision %+v", d)
				}
				got = append(got, d.Delay)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("penalties %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("penalty %v, want %v", got[i], tt.want[i])
				}
			}
		})
	}
}

// TestAdaptation replays the same interference until the length settles:
// score-based growth while the victim stays beyond its goal, gap-based
// when the deferring time dwarfs the penalty, and the cap.
func TestAdaptation(t *testing.T) {
	p := penalty.New(penalty.WithMaxPenalty(40 * ms))
	sc := scene{holderExec: 10 * ms, holderHold: 100 * ms, victims: []victim{{exec: 100 * ms, wait: 60 * ms}}}
	var lengths []time.Duration
	for range 30 {
		ds := p.Decide(sc.snapshot())
		if len(ds) != 1 {
			t.Fatalf("decisions %+v, want one penalty", ds)
		}
		lengths = append(lengths, ds[0].Delay)
	}
	for i := 1; i < len(lengths); i++ {
		if lengths[i] < lengths[i-1] {
			t.Fatalf("length fell: %v", lengths)
		}
		if lengths[i] > 40*ms {
			t.Fatalf("length above the cap: %v", lengths)
		}
	}
	if last := lengths[len(lengths)-1]; last != 40*ms {
		t.Errorf("length settled at %v, want the cap 40ms (%v)", last, lengths)
	}
	st := p.Stats()
	if st.Penalties != 30 || st.ScoreBased == 0 || st.Capped == 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Steps["noisy"] == 0 || st.Steps["noisy"] >= 30 || st.Length["noisy"] != 40*ms {
		t.Errorf("convergence: %d steps to %v", st.Steps["noisy"], st.Length["noisy"])
	}

	// A deferring time that dwarfs the penalty switches to the gap policy.
	g := penalty.New(penalty.WithMaxPenalty(time.Second))
	long := scene{holderExec: 2 * time.Second, holderHold: 2 * time.Second, victims: []victim{{exec: 1000 * ms, wait: 990 * ms}}}
	a := g.Decide(long.snapshot())[0].Delay
	b := g.Decide(long.snapshot())[0].Delay
	if a != penalty.DefaultMinPenalty || b <= a || g.Stats().GapBased != 1 {
		t.Errorf("gap policy: %v then %v, stats %+v", a, b, g.Stats())
	}
}

func TestWatching(t *testing.T) {
	p := penalty.New()
	p.Decide(scene{holderExec: 10 * ms, holderHold: 100 * ms, victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}.snapshot())
	if !p.Watching() {
		t.Error("not watching with a victim beyond its goal")
	}
	p.Decide(&snapshot.Snapshot{})
	if p.Watching() {
		t.Error("watching an empty snapshot")
	}
	var _ policy.Continuous = p
}

// TestChain: task 2 holds a worker slot while it waits for the lock that
// task 1 holds; task 3 waits for a slot. The lock's holder is the noisy
// one, not the request in the middle of the chain.
func TestChain(t *testing.T) {
	s := &snapshot.Snapshot{Resources: []snapshot.Resource{
		{ID: 1, Name: "table", Kind: resource.KindLock},
		{ID: 2, Name: "slots", Kind: resource.KindQueue, Capacity: 1},
	}}
	s.Tasks = []snapshot.Task{
		{ID: 1, Class: "scan", Goal: 0.5, Exec: 500 * ms, First: 0, N: 1},
		{ID: 2, Class: "light", Goal: 0.5, Exec: 100 * ms, First: 1, N: 2},
		{ID: 3, Class: "light", Goal: 0.5, Exec: 50 * ms, First: 3, N: 1},
	}
	s.Usage = []snapshot.Usage{
		{Usage: task.Usage{Resource: 1, Held: 1, Hold: 500 * ms}, Task: 0, Res: 0},
		{Usage: task.Usage{Resource: 2, Held: 1, Hold: 100 * ms}, Task: 1, Res: 1},
		{Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 99 * ms}, Task: 1, Res: 0},
		{Usage: task.Usage{Resource: 2, Waiting: 1, Wait: 50 * ms}, Task: 2, Res: 1},
	}
	ds := penalty.New().Decide(s)
	if len(ds) != 1 || ds[0].Task != 1 {
		t.Fatalf("decisions %+v; want the scan (task 1) penalized once", ds)
	}
}

// TestNoisyWaiterIsNoVictim: the requests of a class seen holding
// resources for long, waiting for a resource that a request of a class
// seen holding briefly holds, do not make that request noisy.
func TestNoisyWaiterIsNoVictim(t *testing.T) {
	p := penalty.New()
	noisy := scene{holderExec: 10 * ms, holderHold: 100 * ms, victims: []victim{{exec: 100 * ms, wait: 90 * ms}}}
	if ds := p.Decide(noisy.snapshot()); len(ds) != 1 {
		t.Fatalf("the noisy holder: %d decisions, want 1", len(ds))
	}
	// A light request holds a worker slot; a noisy request waits for it.
	reversed := scene{holderClass: "light", holderExec: 10 * ms, holderHold: 8 * ms,
		victims: []victim{{exec: 6 * ms, wait: 6 * ms, class: "noisy"}}}
	if ds := p.Decide(reversed.snapshot()); len(ds) != 0 {
		t.Errorf("a light holder was penalized for deferring a noisy waiter: %+v", ds)
	}
	// Before the heavy class was seen holding, the same scene is
	// interference.
	if ds := penalty.New().Decide(reversed.snapshot()); len(ds) != 1 {
		t.Errorf("fresh policy: %d decisions, want 1", len(ds))
	}
}

// TestHoldsComparedPerResource: a light request's long hold of a worker
// slot (held while it waited for the lock) does not make its class heavy
// on the lock.
func TestHoldsComparedPerResource(t *testing.T) {
	res := []snapshot.Resource{{ID: 1, Name: "lock", Kind: resource.KindLock}, {ID: 2, Name: "slots", Kind: resource.KindQueue}}
	p := penalty.New()
	// A noisy request holds the lock for 20 ms; a light one has held a
	// slot for 80 ms, waiting for the lock for 10.
	a := &snapshot.Snapshot{Resources: res,
		Tasks: []snapshot.Task{
			{ID: 1, Class: "noisy", Goal: 0.5, Exec: 20 * ms, First: 0, N: 1},
			{ID: 2, Class: "light", Goal: 0.5, Exec: 12 * ms, First: 1, N: 2},
		},
		Usage: []snapshot.Usage{
			{Usage: task.Usage{Resource: 1, Held: 1, Hold: 20 * ms}, Task: 0, Res: 0},
			{Usage: task.Usage{Resource: 2, Held: 1, Hold: 80 * ms}, Task: 1, Res: 1},
			{Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 10 * ms}, Task: 1, Res: 0},
		}}
	if ds := p.Decide(a); len(ds) != 1 || ds[0].Task != 1 || ds[0].Class != "noisy" {
		t.Fatalf("first snapshot: %+v, want the noisy request penalized, with its class", ds)
	}
	// Later a light request holds the lock for 5 ms and a noisy one has
	// just started waiting for it.
	b := &snapshot.Snapshot{Resources: res,
		Tasks: []snapshot.Task{
			{ID: 3, Class: "light", Goal: 0.5, Exec: 5 * ms, First: 0, N: 1},
			{ID: 4, Class: "noisy", Goal: 0.5, Exec: 3 * ms, First: 1, N: 1},
		},
		Usage: []snapshot.Usage{
			{Usage: task.Usage{Resource: 1, Held: 1, Hold: 5 * ms}, Task: 0, Res: 0},
			{Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 3 * ms}, Task: 1, Res: 0},
		}}
	if ds := p.Decide(b); len(ds) != 0 {
		t.Errorf("a light holder of the lock was penalized for deferring a noisy waiter: %+v", ds)
	}
}

// ended is a snapshot in which a request of the noisy class holds the
// lock, having waited wait for it and served a penalty of served; the
// next snapshot, without it, ends it.
func ended(id uint64, hold, wait, served time.Duration) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Resources: []snapshot.Resource{{ID: 1, Name: "table", Kind: resource.KindLock}},
		Tasks:     []snapshot.Task{{ID: id, Class: "noisy", Goal: 0.5, Exec: hold + wait, PenaltyServed: served, First: 0, N: 1}},
		Usage:     []snapshot.Usage{{Usage: task.Usage{Resource: 1, Held: 1, Hold: hold, Wait: wait}, Task: 0, Res: 0}},
	}
}

// TestCapFollowsStreamQueue: without a slowdown budget, the cap of a noisy
// class's penalties is the larger of the policy's cap and how long its
// requests that ended were held back in front of the resource (penalties
// served plus waits, less half a hold).
func TestCapFollowsStreamQueue(t *testing.T) {
	settle := func(wait, served time.Duration, opts ...penalty.Option) time.Duration {
		p := penalty.New(append([]penalty.Option{penalty.WithMaxSlowdown(0)}, opts...)...)
		for i := range 8 {
			p.Decide(ended(uint64(1+i), 20*ms, wait, served))
		}
		var d time.Duration
		for range 40 {
			ds := p.Decide(scene{holderExec: 30 * ms, holderHold: 30 * ms, victims: []victim{{exec: 30 * ms, wait: 25 * ms}}}.snapshot())
			if len(ds) != 1 {
				t.Fatalf("decisions %+v, want the holder penalized", ds)
			}
			d = ds[0].Delay
			if capped := capOf(t, ds[0]); capped < d {
				t.Fatalf("decision's details say cap %v, below its penalty %v", capped, d)
			}
		}
		return d
	}
	for _, tt := range []struct {
		name         string
		wait, served time.Duration
		want         time.Duration
	}{
		{"a short queue: the policy's cap", 30 * ms, 0, penalty.DefaultMaxPenalty},
		{"a long queue", 150 * ms, 0, 140 * ms},
		{"penalties served and the rest of the queue", 60 * ms, 100 * ms, 150 * ms},
		{"the bound", 3 * time.Second, 0, task.MaxPenalty},
	} {
		if got := settle(tt.wait, tt.served); got != tt.want {
			t.Errorf("%s: length settled at %v, want %v", tt.name, got, tt.want)
		}
	}
	// A cap the user sets holds for streams too.
	if got := settle(150*ms, 0, penalty.WithMaxPenalty(100*ms)); got != 100*ms {
		t.Errorf("with WithMaxPenalty(100ms): length settled at %v", got)
	}
}

// FuzzDecide feeds the policy a sequence of snapshots built from arbitrary
// numbers, negative and huge ones included, in which tasks come and go:
// every penalty must be positive and within task.MaxPenalty, and name a
// live task of the snapshot that is neither cancelled nor already
// penalized.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, int64(20*ms), int64(5*ms))
	f.Add([]byte{255, 0, 255, 0, 128, 64, 32, 16, 8, 4, 2, 1}, int64(-1), int64(1<<62))
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, int64(3*time.Second), int64(-7))
	f.Fuzz(func(t *testing.T, data []byte, hold, wait int64) {
		if len(data) < 4 {
			return
		}
		p := penalty.New()
		for gen := range 12 { // the budget needs 8 snapshots of a stream
			s := &snapshot.Snapshot{At: time.Duration(gen) * 10 * ms}
			nres := 1 + int(data[0]%3)
			for r := range nres {
				s.Resources = append(s.Resources, snapshot.Resource{
					ID: task.ResourceID(r + 1), Name: string(rune('a' + r)),
					Kind: resource.Kind(data[r%len(data)] % 6), Capacity: int64(data[(r+1)%len(data)]) - 10,
				})
			}
			for i := 1; i+2 < len(data); i += 3 {
				if (int(data[i])+gen)%4 == 0 {
					continue // this task is gone in this snapshot
				}
				b := data[i]
				s.Tasks = append(s.Tasks, snapshot.Task{
					ID: uint64(i), Class: string(rune('x' + b%3)), Goal: float64(int(data[i+1])-20) / 10,
					Cancelled: b&8 == 8, Penalty: time.Duration(b&16) * ms, PenaltyServed: time.Duration(wait) * time.Duration(b&1),
					Exec: time.Duration(wait) + time.Duration(data[i+2])*ms, First: int32(len(s.Usage)), N: 1,
				})
				u := task.Usage{Resource: task.ResourceID(1 + int(data[i+1])%nres), Hold: time.Duration(hold) * time.Duration(1+gen)}
				if b&4 == 4 {
					u.Waiting, u.Wait = 1, time.Duration(wait)+time.Duration(data[i+2])*ms
				} else {
					u.Held = int64(data[i+2]) - 3
				}
				s.Usage = append(s.Usage, snapshot.Usage{Usage: u, Task: int32(len(s.Tasks) - 1), Res: int32(int(data[i+1]) % nres)})
			}
			for _, d := range p.Decide(s) {
				i := s.TaskByID(d.Task)
				if i < 0 || s.Tasks[i].Cancelled || s.Tasks[i].Penalty > 0 {
					t.Fatalf("penalized task %d: %+v", d.Task, s.Tasks[max(i, 0)])
				}
				if d.Delay <= 0 || d.Delay > task.MaxPenalty {
					t.Fatalf("penalty of %v", d.Delay)
				}
			}
		}
	})
}

// capOf returns the cap a penalty decision's details name.
func capOf(t *testing.T, d policy.Decision) time.Duration {
	t.Helper()
	for _, a := range d.Details {
		if a.Key == "cap" {
			return a.Value.Duration()
		}
	}
	t.Fatalf("decision %+v names no cap", d)
	return 0
}

// stream is a snapshot of a noisy stream of n requests on the table lock:
// one holds it for 10 ms (two, if shared), the others wait for it, and a
// light request waits behind them. With other set, a request of another
// class holds the lock instead, and every noisy request waits.
func stream(n int, shared, other bool) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Window: 10 * ms, Resources: []snapshot.Resource{{ID: 1, Name: "table", Kind: resource.KindLock}}}
	add := func(id uint64, class string, u task.Usage, exec time.Duration) {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: id, Class: class, Goal: 0.5, Exec: exec, First: int32(len(s.Usage)), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Usage: u, Task: int32(len(s.Tasks) - 1), Res: 0})
	}
	holding := 1
	if shared {
		holding = 2
	}
	if other {
		holding = 0
		add(99, "other", task.Usage{Resource: 1, Held: 1, Hold: 40 * ms}, 40*ms)
	}
	for i := range n {
		u := task.Usage{Resource: 1, Waiting: 1, Wait: 5 * ms}
		if i < holding {
			u = task.Usage{Resource: 1, Held: 1, Hold: 30 * ms}
		}
		add(uint64(i+1), "noisy", u, 30*ms)
	}
	add(100, "light", task.Usage{Resource: 1, Waiting: 1, Wait: 25 * ms}, 30*ms)
	for i := range s.Usage {
		if s.Usage[i].Held > 0 {
			s.Resources[0].Held++
			s.Resources[0].Holders++
		}
	}
	return s
}

// TestCapKeepsSlowdownBudget: once followed, a noisy stream's cap keeps
// its requests within β of their uncontrolled latency L0, estimated from
// its width n, its hold h, and the share ρ of the lock others hold:
// cap = (β·L0 − h − w)/max(f, ½), L0 = max(h+w, n·h/(1−ρ)).
func TestCapKeepsSlowdownBudget(t *testing.T) {
	settle := func(served time.Duration, every int, opts ...penalty.Option) time.Duration {
		p := penalty.New(opts...)
		// Its requests that ended held the lock for 20 ms and waited
		// 30 ms for it (served: after a penalty).
		for i := range 8 {
			p.Decide(ended(uint64(1000+i), 20*ms, 30*ms, served))
		}
		p.Decide(&snapshot.Snapshot{})
		var c time.Duration
		for i := range 400 {
			for _, d := range p.Decide(stream(4, false, every > 0 && i%every == 0)) {
				c = capOf(t, d)
			}
		}
		return c
	}
	for _, tt := range []struct {
		name   string
		served time.Duration
		every  int // another class holds the lock every this many snapshots
		opts   []penalty.Option
		lo, hi time.Duration
	}{
		// L0 = 4·20 = 80 ms; 1.3·80 − 20 − 30 = 54 ms.
		{name: "every request penalized", served: 10 * ms, lo: 54 * ms, hi: 54 * ms},
		// f = 0 counts as ½: 108 ms.
		{name: "none penalized yet", lo: 108 * ms, hi: 108 * ms},
		// β = 2: 2·80 − 50 = 110 ms.
		{name: "a budget of 2", served: 10 * ms, opts: []penalty.Option{penalty.WithMaxSlowdown(2)}, lo: 110 * ms, hi: 110 * ms},
		// ρ = ½: L0 = 160 ms, 1.3·160 − 50 = 158 ms, within the 20 %
		// deadband the cap moves by.
		{name: "others hold the lock half the time", served: 10 * ms, every: 2, lo: 132 * ms, hi: 190 * ms},
	} {
		if got := settle(tt.served, tt.every, tt.opts...); got < tt.lo || got > tt.hi {
			t.Errorf("%s: cap %v, want %v to %v", tt.name, got, tt.lo, tt.hi)
		}
	}
	// A factor of 1 or less turns the budget off: the stream rule's cap.
	for _, x := range []float64{1, 0.5, math.NaN(), math.Inf(1)} {
		if got := settle(10*ms, 0, penalty.WithMaxSlowdown(x)); got != penalty.DefaultMaxPenalty {
			t.Errorf("WithMaxSlowdown(%v): cap %v, want %v", x, got, penalty.DefaultMaxPenalty)
		}
	}
	// WithMaxPenalty overrides the budget.
	if got := settle(10*ms, 0, penalty.WithMaxPenalty(30*ms)); got != 30*ms {
		t.Errorf("WithMaxPenalty(30ms): cap %v", got)
	}
}

// TestSharedStreamOnlyCut: a class whose requests hold a lock together
// (readers) does not queue behind itself as the budget's model has it:
// the budget only cuts the stream rule's cap (100 ms here), never raises
// it.
func TestSharedStreamOnlyCut(t *testing.T) {
	p := penalty.New()
	for i := range 8 {
		p.Decide(ended(uint64(1000+i), 20*ms, 30*ms, 0))
	}
	p.Decide(&snapshot.Snapshot{})
	var c time.Duration
	for range 100 {
		for _, d := range p.Decide(stream(4, true, false)) {
			c = capOf(t, d)
		}
	}
	if c != penalty.DefaultMaxPenalty {
		t.Errorf("cap %v, want %v (the budget alone would give 108ms)", c, penalty.DefaultMaxPenalty)
	}
}

// TestHoldSeenLastCorrected: a request seen holding the lock when last
// seen held it on for half a window on average after that; its class's
// average hold counts it. With a 10 ms window, a request last seen with
// 20 ms of hold and 150 ms of wait counts for 25 ms of hold, and the
// stream rule's cap is 150 − 25/2 = 137.5 ms.
func TestHoldSeenLastCorrected(t *testing.T) {
	p := penalty.New(penalty.WithMaxSlowdown(0))
	for i := range 8 {
		s := ended(uint64(1+i), 20*ms, 150*ms, 0)
		s.Window = 10 * ms
		p.Decide(s)
	}
	sc := scene{holderExec: 30 * ms, holderHold: 30 * ms, victims: []victim{{exec: 30 * ms, wait: 25 * ms}}}.snapshot()
	sc.Window = 10 * ms
	ds := p.Decide(sc)
	if len(ds) != 1 {
		t.Fatalf("decisions %+v, want the holder penalized", ds)
	}
	if got, want := capOf(t, ds[0]), 137500*time.Microsecond; got != want {
		t.Errorf("cap %v, want %v", got, want)
	}
}

// TestStreamFollowedThenForgotten: a stream's budget sets its cap only
// after 8 snapshots of it, and a stream without a live request for 256
// snapshots is forgotten: its cap is the stream rule's again until it
// has been followed anew.
func TestStreamFollowedThenForgotten(t *testing.T) {
	p := penalty.New()
	for i := range 8 {
		p.Decide(ended(uint64(1000+i), 20*ms, 30*ms, 10*ms))
	}
	p.Decide(&snapshot.Snapshot{})
	caps := func(n int) []time.Duration {
		var out []time.Duration
		for range n {
			for _, d := range p.Decide(stream(4, false, false)) {
				out = append(out, capOf(t, d))
			}
		}
		return out
	}
	want := []time.Duration{100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 54 * ms, 54 * ms}
	if got := caps(10); !slices.Equal(got, want) {
		t.Fatalf("caps %v, want %v", got, want)
	}
	for range 256 {
		p.Decide(&snapshot.Snapshot{})
	}
	if got := caps(1); len(got) != 1 || got[0] != penalty.DefaultMaxPenalty {
		t.Errorf("after 256 idle snapshots: caps %v, want the stream rule's %v", got, penalty.DefaultMaxPenalty)
	}
}

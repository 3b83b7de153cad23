package detect

import (
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/latency"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

const ms = time.Millisecond

// step is one scripted loop step: completions in the window and the live
// requests' ages.
type step struct {
	ended int
	lat   time.Duration
	live  []time.Duration
}

func script(at, window time.Duration, st step) *snapshot.Snapshot {
	s := &snapshot.Snapshot{At: at, Window: window}
	var h latency.Histogram
	for range st.ended {
		h.Record(st.lat)
	}
	s.Completed = snapshot.Completions{Ended: uint64(st.ended), Latency: h}
	for i, age := range st.live {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(i + 1), Kind: task.Request, Age: age, Cancellable: true})
	}
	return s
}

// run feeds steps of 10 ms to d and returns whether it fired at the last.
func run(d interface {
	Observe(*snapshot.Snapshot)
	Detect(*snapshot.Snapshot) (bool, string)
}, steps []step) (bool, string) {
	var fired bool
	var why string
	for i, st := range steps {
		s := script(time.Duration(i+1)*10*ms, 10*ms, st)
		if i == 0 {
			s.Window = 0
		}
		d.Observe(s)
		fired, why = d.Detect(s)
	}
	return fired, why
}

func repeat(n int, st step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = st
	}
	return out
}

func TestSLOQuietService(t *testing.T) {
	d := NewSLO(0.99, 50*ms)
	if fired, why := run(d, repeat(150, step{ended: 2, lat: 5 * ms, live: []time.Duration{ms, 2 * ms}})); fired {
		t.Errorf("fired on a healthy service: %s", why)
	}
}

func TestSLOBlockedRequestsFireEarly(t *testing.T) {
	// Two requests complete every 10 ms; then completions stop and the
	// requests queue: the live ones are late before any completes.
	steps := repeat(100, step{ended: 2, lat: 5 * ms})
	var live []time.Duration
	for i := range 8 {
		live = append(live, time.Duration(80-10*i)*ms)
	}
	steps = append(steps, step{ended: 0, live: live})
	fired, why := run(NewSLO(0.99, 50*ms), steps)
	if !fired || !strings.Contains(why, "flat or falling") {
		t.Fatalf("fired=%v (%s); want the late live requests to fire it", fired, why)
	}
}

func TestSLORisingLoadIsNotResourceOverload(t *testing.T) {
	// Latency above the objective while completions double: load, not a
	// stuck resource.
	steps := repeat(50, step{ended: 2, lat: 5 * ms})
	steps = append(steps, repeat(50, step{ended: 6, lat: 80 * ms})...)
	d := NewSLO(0.99, 50*ms)
	if fired, why := run(d, steps); fired {
		t.Errorf("fired on rising throughput: %s", why)
	}
	st := d.Status(script(time.Second, 10*ms, step{}))
	if !st.Missed || st.Flat {
		t.Errorf("status %+v: want the objective missed and throughput rising", st)
	}
}

func TestSLOWindowForgets(t *testing.T) {
	steps := repeat(20, step{ended: 2, lat: 200 * ms}) // a bad patch
	steps = append(steps, repeat(150, step{ended: 2, lat: 5 * ms})...)
	if fired, why := run(NewSLO(0.99, 50*ms), steps); fired {
		t.Errorf("still fired 1.5 s after the bad patch: %s", why)
	}
}

func TestSLOMinSamples(t *testing.T) {
	d := NewSLO(0.99, 50*ms, WithMinSamples(10))
	if fired, _ := run(d, []step{{}, {ended: 1, lat: time.Second}}); fired {
		t.Errorf("one slow request out of one fired it")
	}
}

func TestSLOPrediction(t *testing.T) {
	// A holder 20 ms into a scan 1% done holds the lock; three requests
	// have queued for 5 ms. Counted at their age they are on time; counted
	// with the hold ahead of them they will miss the objective.
	s := &snapshot.Snapshot{At: 2 * time.Second, Window: 10 * ms}
	s.Resources = []snapshot.Resource{{Name: "table", Kind: resource.KindLock, Waiters: 3}}
	s.Tasks = append(s.Tasks, snapshot.Task{ID: 1, Kind: task.Request, Age: 20 * ms, Done: 1, Total: 100, First: 0, N: 1})
	s.Usage = append(s.Usage, snapshot.Usage{Usage: task.Usage{Held: 1, Hold: 20 * ms}, Task: 0, Res: 0})
	for i := range 3 {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(i + 2), Kind: task.Request, Age: 5 * ms, First: int32(1 + i), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Usage: task.Usage{Waiting: 1}, Task: int32(1 + i), Res: 0})
	}
	for range 10 { // a quiet history: ten requests on time
		s.Tasks = append(s.Tasks, snapshot.Task{ID: 99, Kind: task.Request, Age: ms})
	}
	plain := NewSLO(0.99, 50*ms)
	if fired, _ := plain.Detect(s); fired {
		t.Errorf("without prediction, requests 5 ms old must not count as late")
	}
	pred := NewSLO(0.99, 50*ms, WithPrediction(estimate.NewDurations(0)))
	fired, why := pred.Detect(s)
	if !fired {
		t.Fatalf("with prediction the queued requests are late: %+v", pred.Status(s))
	}
	if !strings.Contains(why, "3.8%") && !strings.Contains(why, "above 50ms") {
		t.Errorf("reason %q", why)
	}
}

func TestCollapse(t *testing.T) {
	waiting := func(s *snapshot.Snapshot) *snapshot.Snapshot {
		s.Resources = []snapshot.Resource{{Name: "r"}}
		s.Tasks = []snapshot.Task{{ID: 1, Kind: task.Request, First: 0, N: 1}}
		s.Usage = []snapshot.Usage{{Usage: task.Usage{Waiting: 1}}}
		return s
	}
	c := NewCollapse(0.5)
	at := time.Duration(0)
	feed := func(n int, ended uint64, withWaiter bool) (bool, string) {
		var fired bool
		var why string
		for range n {
			at += 10 * ms
			s := &snapshot.Snapshot{At: at, Window: 10 * ms, Completed: snapshot.Completions{Ended: ended}}
			if withWaiter {
				s = waiting(s)
			}
			c.Observe(s)
			fired, why = c.Detect(s)
		}
		return fired, why
	}
	if fired, why := feed(300, 2, true); fired {
		t.Fatalf("fired at a steady 200/s: %s", why)
	}
	// Throughput falls to a quarter but nobody waits: the load went away.
	if fired, why := feed(150, 0, false); fired {
		t.Errorf("fired with nothing waiting: %s", why)
	}
	if fired, why := feed(1, 0, true); !fired || !strings.Contains(why, "waiting") {
		t.Errorf("did not fire after the collapse with a waiter: %v %q", fired, why)
	}
}

func TestCollapseNeverBusy(t *testing.T) {
	c := NewCollapse(0.5)
	for i := range 200 {
		s := &snapshot.Snapshot{At: time.Duration(i+1) * 10 * ms, Window: 10 * ms}
		if i%50 == 0 {
			s.Completed.Ended = 1
		}
		c.Observe(s)
		if fired, why := c.Detect(s); fired {
			t.Fatalf("an idle service collapsed: %s", why)
		}
	}
}

func TestConstructorsRejectNonsense(t *testing.T) {
	for _, f := range []func(){
		func() { NewSLO(0, ms) }, func() { NewSLO(1, ms) }, func() { NewSLO(0.99, 0) },
		func() { NewCollapse(0) }, func() { NewCollapse(1.5) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		}()
	}
}

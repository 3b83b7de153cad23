package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// simHost is a host of cpus CPUs whose scheduler shares them out equally
// among the runnable threads, as CFS does among threads of one weight:
// with T threads on C < T CPUs each runs C/T of the time. It advances
// tick by tick and hands each process its counters as /proc would, in
// whole clock ticks (rounded down from the exact times).
type simHost struct {
	cpus  int
	busy  float64   // the host's busy time so far, in ticks
	total float64   // the host's time so far
	self  []float64 // each pool's CPU time so far
}

// advance runs one tick with each pool running threads[i] threads and
// hog threads that always run, and returns each pool's sample.
func (h *simHost) advance(threads []int, hog int) []Sample {
	t := hog
	for _, n := range threads {
		t += n
	}
	speed := 1.0
	if t > h.cpus {
		speed = float64(h.cpus) / float64(t)
	}
	h.busy += float64(min(t, h.cpus))
	h.total += float64(h.cpus)
	out := make([]Sample, len(threads))
	for i, n := range threads {
		h.self[i] += float64(n) * speed
		out[i] = Sample{Self: ticksOf(h.self[i]), Busy: ticksOf(h.busy), Total: ticksOf(h.total)}
	}
	return out
}

func ticksOf(x float64) time.Duration {
	return time.Duration(math.Floor(x+1e-9)) * 10 * time.Millisecond
}

// TestControlGenerated runs K pools that always have work beside hog
// threads (plain CPU hogs, or pools that ignore their budget: threads
// that always run, whatever the others do) on simulated hosts of random
// sizes, through phases of random hog counts. By construction, a settled
// host runs every CPU and no thread more: the pools' counts sum to
// max(K, CPUs − hogs) (every pool at 1 when the hogs alone fill the
// host), and hold. Every phase must settle, and stay settled, within its
// length; each pool's count must reach its right value within five
// windows of a phase's start when it is alone and its backoff is at 1.
func TestControlGenerated(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if testing.Short() {
		seed = 1
	}
	for i := range generatedRuns {
		s := seed + uint64(i)
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			if msg := runGenerated(s); msg != "" {
				t.Errorf("seed %d: %s", s, msg)
			}
		})
	}
}

func runGenerated(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	cpus := 1 + rng.IntN(8)
	k := 1 + rng.IntN(4)
	const w = 10
	host := &simHost{cpus: cpus, self: make([]float64, k)}
	ctl := make([]*control, k)
	win := make([]*window, k)
	for i := range k {
		ctl[i] = newControl(float64(cpus), float64(cpus), 1, DefaultGrow, cpus, w, tick, seed*31+uint64(i))
		win[i] = newWindow(w)
	}
	threads := make([]int, k)
	var log []string
	for phase := range 6 {
		hog := rng.IntN(cpus + 2)
		length := 1500 + rng.IntN(1500)
		want := k
		if hog < cpus {
			want = max(k, cpus-hog)
		}
		// A pool alone whose backoff is at 1 must reach its count
		// within five windows.
		fast := k == 1 && ctl[0].backoff == 1
		lastChange, settledAt := 0, -1
		for tick := range length {
			for i := range k {
				threads[i] = ctl[i].n
			}
			samples := host.advance(threads, hog)
			changed := false
			sum := 0
			for i := range k {
				before := ctl[i].n
				ctl[i].step(win[i], samples[i], threads[i])
				if ctl[i].n != before {
					changed = true
				}
				sum += ctl[i].n
				if ctl[i].n < 1 || ctl[i].n > cpus {
					return fmt.Sprintf("phase %d tick %d: pool %d at %d, outside [1, %d]", phase, tick, i, ctl[i].n, cpus)
				}
			}
			if changed {
				lastChange = tick
				log = append(log, fmt.Sprintf("p%d t%d hog %d: %v", phase, tick, hog, counts(ctl)))
				if settledAt >= 0 {
					return fmt.Sprintf("phase %d (%d CPUs, %d pools, %d hog threads): settled at %d with %v, changed again at tick %d; log %v",
						phase, cpus, k, hog, settledAt, want, tick, tail(log))
				}
			}
			if settledAt < 0 && sum == want && tick-lastChange >= 3*w {
				settledAt = tick
			}
		}
		if settledAt < 0 {
			return fmt.Sprintf("phase %d (%d CPUs, %d pools, %d hog threads): not settled at a sum of %d in %d ticks: %v; log %v",
				phase, cpus, k, hog, want, length, counts(ctl), tail(log))
		}
		if fast && settledAt-3*w > 5*w {
			return fmt.Sprintf("phase %d (%d CPUs, one pool, %d hog threads): reached %d only at tick %d", phase, cpus, hog, want, settledAt-3*w)
		}
	}
	return ""
}

func counts(ctl []*control) []int {
	out := make([]int, len(ctl))
	for i, c := range ctl {
		out[i] = c.n
	}
	return out
}

func tail(log []string) []string { return log[max(len(log)-8, 0):] }

// generatedRuns is how many generated hosts TestControlGenerated runs.
var generatedRuns = 200

// simReader reads a simulated host for one pool: at each Read the host
// runs a tick with the pool's running work as its threads, beside hog
// threads.
type simReader struct {
	host *simHost
	pool func() int // the work the pool runs
	hog  func() int
}

func (r *simReader) Read() (Sample, error) {
	return r.host.advance([]int{r.pool()}, r.hog())[0], nil
}

// TestPoolFollowsGenerated runs a real pool, with work that never runs
// out, on a simulated host whose hog threads change at random: the
// pool's active count reaches CPUs − hogs (at least 1) within five
// windows of each change and holds it. The feeders' and the loop's
// interleavings vary from run to run (an item that ends at the instant
// of a tick is or is not running when the host is read), and the count
// must hold in all of them.
func TestPoolFollowsGenerated(t *testing.T) {
	for s := range uint64(5) {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { poolFollows(t, s) })
		})
	}
}

func poolFollows(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	cpus := 2 + rng.IntN(6)
	var hog atomic.Int64
	var pool atomic.Pointer[Pool]
	running := func() int {
		if p := pool.Load(); p != nil {
			return int(p.Queue().Running())
		}
		return 0
	}
	r := &simReader{host: &simHost{cpus: cpus, self: make([]float64, 1)}, pool: running, hog: func() int { return int(hog.Load()) }}
	var actives []int
	var mu sync.Mutex
	p, err := NewPool(WithBudget(float64(cpus)), withHost(cpus), withSeed(seed+1), WithReader(r), WithTick(tick), noPark,
		WithObserver(func(s StepInfo) { mu.Lock(); actives = append(actives, s.Active); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	pool.Store(p)
	// Work that never runs out: items of 3 ms, 4·CPUs always queued.
	ctx, stop := context.WithCancel(context.Background())
	var feeders sync.WaitGroup
	for range 4 * cpus {
		feeders.Go(func() {
			for ctx.Err() == nil {
				p.Submit(ctx, func(context.Context) error { time.Sleep(3 * time.Millisecond); return nil })
			}
		})
	}
	defer func() {
		stop()
		feeders.Wait()
		p.Close()
	}()
	const w = 10 // the default window
	for phase := range 5 {
		h := rng.IntN(cpus + 1)
		want := max(cpus-h, 1)
		hog.Store(int64(h))
		mu.Lock()
		start := len(actives)
		mu.Unlock()
		time.Sleep(40 * w * tick)
		synctest.Wait()
		mu.Lock()
		got := actives[start:]
		mu.Unlock()
		reached := -1
		for i, a := range got {
			if a == want && reached < 0 {
				reached = i
			}
			if reached >= 0 && a != want {
				t.Errorf("phase %d (%d CPUs, %d hog threads): reached %d at tick %d, then %d at tick %d", phase, cpus, h, want, reached, a, i)
				return
			}
		}
		if reached < 0 || reached > 5*w+1 {
			t.Errorf("phase %d (%d CPUs, %d hog threads): active counts %v, want %d within %d ticks", phase, cpus, h, got[:min(len(got), 80)], want, 5*w)
			return
		}
	}
}

// TestNeighbourPause is the two pools of the cpu suite's k2 case on two
// CPUs, both with work that never runs out, where one pauses for 50 ms.
// Under the friendlypool share rule (⌈share · CPUs⌉, share = Δself /
// Δbusy over the window) the other's share reaches 1 during the pause,
// it takes both CPUs, and when its neighbour comes back it holds them: at
// two workers beside one its share is 2/3 and ⌈2/3 · 2⌉ = 2, so three
// threads share two CPUs for good. The control loop gives the CPU back
// within a few ticks of the neighbour's return and both settle at one.
func TestNeighbourPause(t *testing.T) {
	const w, cpus = 10, 2
	run := func(rule func(i int, s Sample, running int) int) (final []int) {
		host := &simHost{cpus: cpus, self: make([]float64, 2)}
		n := []int{cpus, cpus}
		threads := make([]int, 2)
		for tick := range 600 {
			copy(threads, n)
			if tick >= 200 && tick < 205 {
				threads[1] = 0 // the pause
			}
			samples := host.advance(threads, 0)
			for i := range 2 {
				n[i] = rule(i, samples[i], threads[i])
			}
		}
		return n
	}
	// The share rule, over the same window.
	wins := []*window{newWindow(w), newWindow(w)}
	shareRule := func(i int, s Sample, running int) int {
		e, ok := wins[i].push(s, running)
		if !ok {
			return cpus
		}
		return Active(1, e.share, cpus, cpus)
	}
	if got := run(shareRule); got[0]+got[1] != 3 {
		t.Errorf("share rule: %v, want the 2 + 1 it is known to settle at", got)
	}
	ctl := []*control{newControl(cpus, cpus, 1, DefaultGrow, cpus, w, tick, 1), newControl(cpus, cpus, 1, DefaultGrow, cpus, w, tick, 2)}
	cwins := []*window{newWindow(w), newWindow(w)}
	loop := func(i int, s Sample, running int) int {
		ctl[i].step(cwins[i], s, running)
		return ctl[i].n
	}
	if got := run(loop); got[0] != 1 || got[1] != 1 {
		t.Errorf("control loop: %v, want 1 + 1", got)
	}
}

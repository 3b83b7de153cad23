package cancel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// The generated workloads of this file run on a simulated host whose
// other processes take the CPU away: every hold of every task is
// stretched by the host's factor of the moment (2× to 100×, in bursts)
// times a jitter of the task's own. The service has no culprit: light
// classes go through a worker slot, the CPU tokens and sometimes a table
// lock; heavy but honest classes (reports reporting their progress) hold
// a pool of their own, leaving room, and share a class name with a light
// class in some workloads (a class that merges routes). Whatever queues
// there, nothing a cancellation can relieve causes it, and the policy
// must cancel nothing. The same workloads with one culprit injected (a
// task of a class of its own holding the table lock, both CPU tokens or
// half the worker slots for seconds) must have it cancelled, and nothing
// else. The simulation steps a millisecond at a time and shows the policy
// a snapshot every 5 ms, with an overload detector firing throughout, as
// a starved host makes one fire.

// hostRes is a simulated resource: units held and a FIFO of waiting tasks.
type hostRes struct {
	name  string
	kind  resource.Kind
	cap   int64
	held  int64
	queue []*hostTask
	// wait accumulated in the current window, by the tasks waiting.
	windowWait time.Duration
}

// hostStep is one resource a task takes, for base of its own work.
type hostStep struct {
	res   int
	units int64
	base  time.Duration
	whole bool // held until the task ends (a worker slot, a pool's units)
	grab  bool // takes the units free as they come, never waiting
}

type hostUse struct {
	held    int64
	hold    time.Duration // time holding (cumulative)
	wait    time.Duration
	waiting bool
}

type hostTask struct {
	id        uint64
	class     string
	begin     time.Duration
	steps     []hostStep
	cur       int     // the step in progress
	left      float64 // of the current step's base work, in ns
	jitter    float64
	uses      [resReports + 1]hostUse
	waiting   int // resource waited for, -1 for none
	reports   bool
	done, tot int64
	culprit   bool
	want      int64 // units a grabbing step still wants
	cancelled bool
	ended     bool
}

type simHost struct {
	rng   *rand.Rand
	now   time.Duration
	res   []*hostRes
	live  []*hostTask
	next  uint64
	exec  time.Duration // of the tasks that ended in the window
	until time.Duration // the host factor's current burst ends
	f     float64
	// warm is how long the host leaves the service alone at first.
	warm time.Duration
	// grabber takes freed units before the waiters do (the culprit of
	// the workers: a batch of higher priority).
	grabber *hostTask
}

const (
	resWorkers = iota
	resCPU
	resTable
	resReports
)

// factor returns the host's stretch factor now: bursts of 50 to 500 ms,
// each of a factor between 2 and 100 (log-uniform), or a milder one.
func (h *simHost) factor() float64 {
	if h.now < h.warm {
		return 1
	}
	if h.now >= h.until {
		h.until = h.now + time.Duration(50+h.rng.IntN(450))*ms
		if h.rng.IntN(2) == 0 {
			h.f = math.Exp(math.Log(2) + h.rng.Float64()*(math.Log(100)-math.Log(2)))
		} else {
			h.f = 2 + 3*h.rng.Float64()
		}
	}
	return h.f
}

func (h *simHost) start(t *hostTask) {
	t.id = h.next
	h.next++
	t.begin = h.now
	t.waiting = -1
	t.jitter = math.Exp((h.rng.Float64()*2 - 1) * math.Log(3)) // 1/3× to 3×
	t.cur = -1
	h.live = append(h.live, t)
	h.advance(t)
}

// advance moves t to its next step: it asks for the step's resource, and
// ends when it has none left.
func (h *simHost) advance(t *hostTask) {
	// Release what the finished step held, unless it is held to the end.
	if t.cur >= 0 && !t.steps[t.cur].whole {
		h.release(t, t.steps[t.cur].res)
	}
	t.cur++
	if t.cur >= len(t.steps) {
		h.end(t)
		return
	}
	st := t.steps[t.cur]
	t.left = float64(st.base)
	h.acquire(t, st.res)
}

func (h *simHost) use(t *hostTask, r int) *hostUse { return &t.uses[r] }

func (h *simHost) acquire(t *hostTask, r int) {
	res := h.res[r]
	units := t.steps[t.cur].units
	if t.steps[t.cur].grab {
		h.grabber = t
		t.want = units
		h.grab(t, r)
		return
	}
	if len(res.queue) == 0 && res.held+units <= res.cap {
		res.held += units
		h.use(t, r).held += units
		return
	}
	res.queue = append(res.queue, t)
	t.waiting = r
	h.use(t, r).waiting = true
}

// grab takes for t what is free of resource r, up to what it wants.
func (h *simHost) grab(t *hostTask, r int) {
	res := h.res[r]
	n := min(t.want, res.cap-res.held)
	if n > 0 {
		res.held += n
		t.uses[r].held += n
		t.want -= n
	}
}

func (h *simHost) release(t *hostTask, r int) {
	u := &t.uses[r]
	if u.held == 0 {
		return
	}
	res := h.res[r]
	res.held -= u.held
	u.held = 0
	if g := h.grabber; g != nil && !g.ended && g.want > 0 && g.steps[g.cur].res == r {
		h.grab(g, r) // it comes first
	}
	// Hand the units to the waiters, in order.
	for len(res.queue) > 0 {
		w := res.queue[0]
		units := w.steps[w.cur].units
		if res.held+units > res.cap {
			break
		}
		res.queue = res.queue[1:]
		res.held += units
		wu := h.use(w, r)
		wu.held += units
		wu.waiting = false
		w.waiting = -1
	}
}

func (h *simHost) end(t *hostTask) {
	for r := range t.uses {
		h.release(t, r)
	}
	if t.waiting >= 0 {
		res := h.res[t.waiting]
		res.queue = slices.DeleteFunc(res.queue, func(w *hostTask) bool { return w == t })
		t.waiting = -1
	}
	t.ended = true
	h.exec += h.now - t.begin
}

// tick advances the simulation by dt.
func (h *simHost) tick(dt time.Duration) {
	f := h.factor()
	h.now += dt
	for _, t := range h.live {
		if t.ended {
			continue
		}
		if t.cancelled {
			h.end(t) // it notices its cancellation at once
			continue
		}
		for r := range t.uses {
			u := &t.uses[r]
			if u.held > 0 {
				u.hold += dt
			}
			if u.waiting {
				u.wait += dt
				h.res[r].windowWait += dt
			}
		}
		if t.want > 0 {
			h.grab(t, t.steps[t.cur].res)
		}
		if t.waiting >= 0 {
			continue
		}
		// The host stretches the tasks' holds; the culprit's are long
		// on any host.
		if t.culprit {
			t.left -= float64(dt)
		} else {
			t.left -= float64(dt) / (f * t.jitter)
		}
		if t.reports {
			st := t.steps[len(t.steps)-1]
			if t.cur == len(t.steps)-1 {
				t.done = int64(float64(t.tot) * (1 - t.left/float64(st.base)))
			}
		}
		if t.left <= 0 {
			h.advance(t)
		}
	}
	h.live = slices.DeleteFunc(h.live, func(t *hostTask) bool { return t.ended })
}

// snapshot returns the policy's view of the host now, over a window.
func (h *simHost) snapshot(window time.Duration) *snapshot.Snapshot {
	s := &snapshot.Snapshot{At: h.now, Window: window}
	for _, r := range h.res {
		s.Resources = append(s.Resources, snapshot.Resource{
			ID: task.ResourceID(len(s.Resources) + 1), Name: r.name, Kind: r.kind, Capacity: r.cap,
			Held: r.held, Waiters: len(r.queue), WindowWait: r.windowWait, Queued: int64(len(r.queue)),
		})
		r.windowWait = 0
	}
	for _, t := range h.live {
		st := snapshot.Task{ID: t.id, Class: t.class, Kind: task.Request, Cancellable: true, Cancelled: t.cancelled,
			Blocked: t.waiting >= 0, Active: true, Age: h.now - t.begin, Exec: h.now - t.begin,
			First: int32(len(s.Usage))}
		if t.reports {
			st.Done, st.Total = t.done, t.tot
		}
		for r := range h.res {
			u := &t.uses[r]
			if u.held == 0 && u.hold == 0 && u.wait == 0 && !u.waiting {
				continue
			}
			w := int32(0)
			if u.waiting {
				w = 1
			}
			s.Usage = append(s.Usage, snapshot.Usage{
				Usage: task.Usage{Held: u.held, Hold: u.hold, Wait: u.wait, Waiting: w},
				Task:  int32(len(s.Tasks)), Res: int32(r),
			})
			st.N++
		}
		s.Tasks = append(s.Tasks, st)
	}
	s.Completed.Exec = h.exec
	h.exec = 0
	return s
}

// starveWorkload is one generated workload.
type starveWorkload struct {
	seed     uint64
	desc     string
	duration time.Duration
	minGain  time.Duration
	arrive   func(h *simHost) // starts the tasks arriving at h.now
}

// genStarve generates the workload of seed, with a culprit or not, on a
// host hostile from the start (cold) or after the service ran alone for a
// second.
func genStarve(seed uint64, culprit, cold bool) (*simHost, starveWorkload) {
	rng := rand.New(rand.NewPCG(seed, 0x57a7e))
	h := &simHost{rng: rng, next: 1}
	if !cold {
		h.warm = time.Second
	}
	workers := int64(8 << rng.IntN(4)) // 8 to 64
	h.res = []*hostRes{
		{name: "workers", kind: resource.KindQueue, cap: workers},
		{name: "cpu", kind: resource.KindCPU, cap: 2},
		{name: "table", kind: resource.KindLock, cap: 1},
		{name: "reports", kind: resource.KindQueue, cap: 16},
	}
	w := starveWorkload{seed: seed, duration: h.warm + time.Duration(3000+rng.IntN(3000))*ms,
		minGain: time.Duration(10+rng.IntN(16)) * ms}
	// Light classes: a worker slot for the whole request, CPU in one or
	// two quanta, the table lock sometimes.
	type light struct {
		class        string
		rate         float64 // per second
		cpu, lock    time.Duration
		locks, twice bool
	}
	var lights []light
	for i := range 1 + rng.IntN(3) {
		l := light{class: fmt.Sprintf("light-%d", i), rate: float64(30 + rng.IntN(120)),
			cpu:   time.Duration(100+rng.IntN(900)) * time.Microsecond,
			lock:  time.Duration(50+rng.IntN(950)) * time.Microsecond,
			locks: rng.IntN(2) == 0, twice: rng.IntN(2) == 0}
		lights = append(lights, l)
	}
	// Heavy but honest: reports on a pool of their own, one at a time
	// (leaving room), reporting their progress; their class merges with a light one in
	// some workloads.
	reportClass := "report"
	if rng.IntN(2) == 0 {
		reportClass = lights[0].class
	}
	reportEvery := time.Duration(300+rng.IntN(1500)) * ms
	nextReport := time.Duration(rng.IntN(int(reportEvery)))
	// The culprit.
	// On a resource the light tasks use, so that it hurts them.
	kind := rng.IntN(3)
	if kind == 0 && !slices.ContainsFunc(lights, func(l light) bool { return l.locks }) {
		kind = 1
	}
	hostile := w.duration - h.warm
	culpritAt := (h.warm + hostile/4 + time.Duration(rng.IntN(int(hostile/4)))).Truncate(ms)
	culpritReports := rng.IntN(2) == 0
	w.desc = fmt.Sprintf("seed %d: %v (hostile after %v), workers %d, min gain %v, %d light classes, reports of class %q every %v",
		seed, w.duration, h.warm, workers, w.minGain, len(lights), reportClass, reportEvery)
	if culprit {
		w.desc += fmt.Sprintf(", culprit at %v on %s (progress reported: %v)", culpritAt, h.res[[]int{resTable, resCPU, resWorkers}[kind]].name, culpritReports)
	}
	live := func() int { return len(h.live) }
	w.arrive = func(h *simHost) {
		for _, l := range lights {
			// Poisson arrivals, one millisecond at a time; a client
			// gives up arriving when 400 requests are in already.
			if rng.Float64() >= l.rate/1000 || live() >= 400 {
				continue
			}
			steps := []hostStep{{res: resWorkers, units: 1, base: 50 * time.Microsecond, whole: true},
				{res: resCPU, units: 1, base: l.cpu}}
			if l.locks {
				steps = append(steps, hostStep{res: resTable, units: 1, base: l.lock})
			}
			if l.twice {
				steps = append(steps, hostStep{res: resCPU, units: 1, base: l.cpu})
			}
			h.start(&hostTask{class: l.class, steps: steps})
		}
		if h.now >= nextReport && !slices.ContainsFunc(h.live, func(t *hostTask) bool { return t.reports && !t.culprit }) {
			// One report at a time: the pool always has room.
			nextReport = h.now + reportEvery
			units := int64(2 + rng.IntN(3)) // 2 to 4 of 16: two at once leave room
			work := time.Duration(20+rng.IntN(80)) * ms
			h.start(&hostTask{class: reportClass, reports: true, tot: 100,
				steps: []hostStep{{res: resReports, units: units, base: work}}})
		}
		if culprit && h.now == culpritAt {
			t := &hostTask{class: "culprit", culprit: true, reports: culpritReports, tot: 1000}
			long := 60 * time.Second // never ends in the run
			switch kind {
			case 0:
				t.steps = []hostStep{{res: resTable, units: 1, base: long}}
			case 1:
				t.steps = []hostStep{{res: resCPU, units: 2, base: long}}
			default:
				// Slots as they come free, before the waiters (a
				// batch of higher priority, never waiting in the
				// queue), all of them.
				t.steps = []hostStep{{res: resWorkers, units: workers, base: long, grab: true}}
			}
			h.start(t)
		}
	}
	return h, w
}

// runStarve runs a generated workload under a fresh policy and returns
// the cancel decisions, by whether each named the culprit.
func runStarve(t *testing.T, seed uint64, culprit, cold bool) (culprits, others []policy.Decision, desc string) {
	h, w := genStarve(seed, culprit, cold)
	a := NewAtropos(MultiObjective, WithMinGain(w.minGain))
	const window = 5 * ms
	byID := map[uint64]*hostTask{}
	for h.now < w.duration {
		w.arrive(h)
		h.tick(ms)
		if h.now%window != 0 {
			continue
		}
		for _, tk := range h.live {
			byID[tk.id] = tk
		}
		s := h.snapshot(window)
		a.Observe(s)
		for _, d := range a.Decide(s) {
			if d.Action != policy.Cancel {
				continue
			}
			tk := byID[d.Task]
			if tk == nil {
				t.Fatalf("%s: cancelled task %d, not live", w.desc, d.Task)
			}
			tk.cancelled = true
			d.Reason = fmt.Sprintf("at %v: %s", h.now, d.Reason)
			if tk.culprit {
				culprits = append(culprits, d)
			} else {
				others = append(others, d)
			}
		}
		for id, tk := range byID {
			if tk.ended {
				delete(byID, id)
			}
		}
	}
	return culprits, others, w.desc
}

// stopAfter ends a generated test at its fifth failing seed: enough to
// see the pattern, and a broken rule is found in seconds.
func stopAfter(t *testing.T, failed int) {
	t.Helper()
	if failed >= 5 {
		t.Fatalf("stopped after %d failing seeds", failed)
	}
}

func starveSeeds() uint64 {
	if testing.Short() || raceEnabled {
		return 60
	}
	return 500
}

// describe lists decisions' classes and reasons.
func describe(ds []policy.Decision) string {
	var b strings.Builder
	for i, d := range ds {
		if i == 3 {
			fmt.Fprintf(&b, "\n\t… %d more", len(ds)-i)
			break
		}
		fmt.Fprintf(&b, "\n\t%s %s", d.Class, d.Reason)
	}
	return b.String()
}

// beyondColdStart returns the decisions of ds other than the first
// cancellation of a class on a resource while the class has no history
// there (its progress the half-done guess): a class with no history is
// decided on by its holds, and a host stretching its first tasks can cost
// that one cancellation (docs/CANCELLATION.md), never a second.
func beyondColdStart(ds []policy.Decision) []policy.Decision {
	seen := map[string]bool{}
	var out []policy.Decision
	for _, d := range ds {
		ms := freesRe.FindAllStringSubmatch(d.Reason, -1)
		first := strings.Contains(d.Reason, "(half-done)") && len(ms) > 0
		for _, m := range ms {
			k := d.Class + " on " + m[1]
			first = first && !seen[k]
			seen[k] = true
		}
		if !first {
			out = append(out, d)
		}
	}
	return out
}

func TestStretchedHostNoCulpritCancelsNothing(t *testing.T) {
	seeds := starveSeeds()
	failed, cold := 0, 0
	for seed := range seeds {
		_, all, desc := runStarve(t, seed, false, false)
		others := beyondColdStart(all)
		if len(all) > 0 {
			cold++
		}
		if len(others) > 0 {
			failed++
			t.Errorf("%s: %d cancellation(s) with no culprit:%s", desc, len(others), describe(others))
			stopAfter(t, failed)
		}
	}
	t.Logf("%d seeds, %d with a cancellation beyond a class's first with no history, %d with any", seeds, failed, cold)
}

func TestStretchedHostCulpritIsCancelledAlone(t *testing.T) {
	seeds := starveSeeds()
	failed := 0
	for seed := range seeds {
		culprits, all, desc := runStarve(t, seed, true, false)
		others := beyondColdStart(all)
		if len(culprits) != 1 || len(others) > 0 {
			failed++
			t.Errorf("%s: culprit cancelled %d time(s), others %d time(s); want it once and nothing else:%s", desc, len(culprits), len(others), describe(others))
			stopAfter(t, failed)
		}
	}
	t.Logf("%d seeds, %d failed", seeds, failed)
}

// freesRe finds the resources a decision's reason says it frees.
var freesRe = regexp.MustCompile(`% of ([a-z]+) \(contention`)

func TestStretchedHostFromTheStart(t *testing.T) {
	seeds := starveSeeds()
	hist := map[int]int{}
	failed := 0
	for seed := range seeds {
		_, others, desc := runStarve(t, seed, false, true)
		per := map[string]int{}
		most := 0
		for _, d := range others {
			for _, m := range freesRe.FindAllStringSubmatch(d.Reason, -1) {
				k := d.Class + " on " + m[1]
				per[k]++
				most = max(most, per[k])
			}
		}
		hist[most]++
		if most > 2 {
			failed++
			t.Errorf("%s: %v", desc, per)
			stopAfter(t, failed)
		}
	}
	t.Logf("%d seeds, most cancellations of one class on one resource: %v", seeds, hist)
}

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// poissonHost simulates K processes on a host of C CPUs, each running
// an open-loop Poisson stream of CPU-bound items through a pool, beside
// hog threads that always run and rogue processes (the same stream
// through a static pool of C workers): the cpu suite's cases, with a
// scheduler that shares the CPUs out equally among the runnable threads
// and counters that advance in whole clock ticks. A measured pool is
// either static or driven by the control loop, which reads its counters
// every 10 ms. Time advances in steps of a quarter of a millisecond.
type poissonHost struct {
	cpus, k, hogs, rogues int
	item                  float64 // an item's CPU time alone, ms
	rate                  float64 // arrivals per ms, per process that runs items
	// steal, when not zero, is the fraction of the time the hypervisor
	// takes one of the host's CPUs away, in bursts of 10–200 ms at random
	// (the host's threads then share the CPUs left; /proc/stat counts the
	// time as steal, part of the total and not of the busy time).
	steal float64
}

// poissonRun is what one simulated run measured of the K processes.
type poissonRun struct {
	p99        float64 // work latency (start to end), ms, over every process's items
	throughput float64 // items completed per ms, all processes
}

const simStep = 0.25 // ms

// run simulates ms milliseconds with the K measured pools of sizes n (0:
// a friendly pool); every process's arrivals are seeded by seed and its
// index, the same whatever the pools.
func (h poissonHost) run(seed uint64, ms float64, n []int) poissonRun {
	type proc struct {
		queue   []float64 // the remaining work of the items, FIFO; the first n run
		started []float64 // the start times of the running ones, -1 before
		next    float64   // the next arrival
		arr     *rand.Rand
		self    float64
		ctl     *control
		win     *window
		n       int
	}
	ps := make([]*proc, h.k+h.rogues)
	for i := range ps {
		p := &proc{arr: rand.New(rand.NewPCG(seed, uint64(i)+100))}
		switch {
		case i >= h.k:
			p.n = h.cpus
		case n[i] > 0:
			p.n = n[i]
		default:
			p.ctl = newControl(float64(h.cpus), float64(h.cpus), 1, DefaultGrow, h.cpus, 10, tick, seed*7+uint64(i))
			p.win = newWindow(10)
			p.n = p.ctl.n
		}
		p.next = p.arr.ExpFloat64() / h.rate
		ps[i] = p
	}
	var lat []float64
	busy, total, stolen, done := 0.0, 0.0, 0.0, 0
	hv := rand.New(rand.NewPCG(seed, 99)) // the hypervisor's bursts
	stealing, stealUntil := false, 0.0
	const warm = 1000.0
	perTick := int(10 / simStep)
	for step := 0; float64(step)*simStep < ms; step++ {
		now := float64(step) * simStep
		threads := h.hogs
		for _, p := range ps {
			for p.next <= now {
				p.queue = append(p.queue, h.item)
				p.started = append(p.started, -1)
				p.next += p.arr.ExpFloat64() / h.rate
			}
			threads += min(p.n, len(p.queue))
		}
		if h.steal > 0 && now >= stealUntil {
			// Bursts of 10–200 ms, on for a fraction steal of the time.
			burst := 10 + 190*hv.Float64()
			stealing = hv.Float64() < h.steal
			stealUntil = now + burst
		}
		cpus := float64(h.cpus)
		if stealing {
			cpus--
			stolen += simStep
		}
		speed := 1.0
		if float64(threads) > cpus {
			speed = cpus / float64(threads)
		}
		busy += min(float64(threads), cpus) * simStep
		total += float64(h.cpus) * simStep
		for i, p := range ps {
			run := min(p.n, len(p.queue))
			p.self += float64(run) * speed * simStep
			for j := range run {
				if p.started[j] < 0 {
					p.started[j] = now
				}
				p.queue[j] -= speed * simStep
			}
			for j := 0; j < min(p.n, len(p.queue)); {
				if p.queue[j] > 1e-9 {
					j++
					continue
				}
				if i < h.k && p.started[j] >= warm {
					lat = append(lat, now+simStep-p.started[j])
				}
				if i < h.k && now >= warm {
					done++
				}
				p.queue = slices.Delete(p.queue, j, j+1)
				p.started = slices.Delete(p.started, j, j+1)
			}
		}
		if (step+1)%perTick == 0 {
			for _, p := range ps {
				if p.ctl != nil {
					s := Sample{Self: msTicks(p.self), Busy: msTicks(busy), Total: msTicks(total), Steal: msTicks(stolen)}
					p.ctl.step(p.win, s, min(p.n, len(p.queue)))
					p.n = p.ctl.n
				}
			}
		}
	}
	slices.Sort(lat)
	r := poissonRun{throughput: float64(done) / (ms - warm)}
	if len(lat) > 0 {
		r.p99 = lat[int(math.Ceil(0.99*float64(len(lat))))-1]
	}
	return r
}

// msTicks is a CPU time in ms as /proc gives it: in whole 10-ms ticks.
func msTicks(ms float64) time.Duration {
	return time.Duration(math.Floor(ms/10+1e-9)) * 10 * time.Millisecond
}

// TestControlPoisson runs the cpu suite's targets on simulated hosts of
// random sizes and cases: K friendly pools with Poisson arrivals
// offering 90 % of the CPUs that hogs leave, alone or beside a hog or a
// rogue pool, against the same arrivals through the oracle's static
// split (the CPUs the hogs leave, shared among the processes that run
// items) and through pools of as many workers as CPUs. The friendly
// pools' work p99 must be within 1.3× of the oracle's, and their
// throughput at least 1/1.1 of the ignorant pools' when every neighbour
// is a pool like them; alone, within 5 % of the ignorant pool on both.
// A neighbour whose queue empties for a moment leaves room a pool must
// not grow into: the work it would start runs beside the neighbour's
// when it comes back. When a grow looked at one window only, 18 of the
// first 400 hosts failed (K pools at one worker each on K CPUs, K = 2
// or 3, their p99 up to 1.5× the oracle's); looking back four windows,
// none.
//
// The hosts are drawn from fixed seeds, so that the test gives the same
// verdict every run; MOIRAI_CPU_POISSON=random draws them from the clock
// (and MOIRAI_CPU_POISSON=N replays seed N). Over 6000 random hosts, 3
// came out above 1.3×, by one step of the simulation (4.25 ms against
// 1.3 · 3.25 ms; 8 against 1.3 · 6): 3 or 4 pools at one worker each,
// on as many CPUs, whose neighbours' queues emptied together.
func TestControlPoisson(t *testing.T) { poissonHosts(t, 0) }

// TestControlPoissonSteal is TestControlPoisson on hosts whose
// hypervisor takes one of the CPUs away a fraction of the time (10 % to
// 50 %), in bursts of 10–200 ms, offered 90 % of what is left on
// average. Stolen time is counted as time, not as busy time: a pool that
// reads it as idle CPU grows into a CPU that is not there.
func TestControlPoissonSteal(t *testing.T) { poissonHosts(t, 1) }

// poissonHosts draws the hosts of TestControlPoisson (with steal, when
// steal is 1, of TestControlPoissonSteal) and checks the targets on each.
func poissonHosts(t *testing.T, steal int) {
	seed, runs := uint64(1), poissonRuns
	switch v := os.Getenv("MOIRAI_CPU_POISSON"); v {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
	default:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MOIRAI_CPU_POISSON=%q: want random or a seed", v)
		}
		seed, runs = n, 1
	}
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(s, 5+uint64(steal)))
			// Hosts where a static split is the oracle: the CPUs the
			// hogs leave divide among the processes that run items in
			// whole workers, or there are at least as many processes as
			// CPUs (one worker each). Where they do not (2 processes on
			// 3 CPUs), no static split both uses every CPU and shares
			// none.
			var h poissonHost
			for {
				h = poissonHost{cpus: 2 + rng.IntN(3), k: 1 + rng.IntN(4), item: 2 + 4*rng.Float64()}
				switch rng.IntN(3) {
				case 1:
					h.hogs = 1
				case 2:
					h.rogues = 1
				}
				if p := h.k + h.rogues; (h.cpus-h.hogs)%p == 0 || p >= h.cpus-h.hogs {
					break
				}
			}
			if steal > 0 {
				h.steal = 0.1 + 0.4*rng.Float64()
			}
			procs := h.k + h.rogues
			h.rate = 0.9 * (float64(h.cpus-h.hogs) - h.steal) / float64(procs) / h.item
			// The oracle's split: the CPUs the hogs leave, shared
			// equally among the processes that run items (a rogue
			// included), at least one worker each.
			oracle, ign := make([]int, h.k), make([]int, h.k)
			for i := range h.k {
				oracle[i], ign[i] = max(1, (h.cpus-h.hogs)/procs), h.cpus
			}
			const ms = 20000
			opt, ig, fr := h.run(s, ms, oracle), h.run(s, ms, ign), h.run(s, ms, make([]int, h.k))
			what := fmt.Sprintf("%d CPUs, K=%d, %d hogs, %d rogues, steal %.2f, items of %.2f ms: p99 %.2f ms (oracle's %.2f, ignorant's %.2f), throughput %.3f/ms (oracle's %.3f, ignorant's %.3f)",
				h.cpus, h.k, h.hogs, h.rogues, h.steal, h.item, fr.p99, opt.p99, ig.p99, fr.throughput, opt.throughput, ig.throughput)
			alone := h.k == 1 && h.hogs == 0 && h.rogues == 0
			switch {
			case alone && (fr.p99 > 1.05*ig.p99 || fr.throughput < 0.95*ig.throughput):
				t.Errorf("alone: %s", what)
			case !alone && fr.p99 > 1.3*opt.p99:
				t.Errorf("p99 over 1.3× the oracle's: %s", what)
			case !alone && h.hogs == 0 && h.rogues == 0 && fr.throughput < ig.throughput/1.1:
				t.Errorf("throughput under 1/1.1 of ignorant's: %s", what)
			default:
				t.Log(what)
			}
		})
	}
}

// poissonRuns is how many generated hosts TestControlPoisson runs.
var poissonRuns = 40

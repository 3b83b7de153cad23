// Command hotpath is the hot path's regression guard: it times
// moirai's primitives against their baselines — sync.Mutex for the Mutex,
// x/sync/semaphore for the Semaphore, alone and from every P at once — in
// one process, and fails when a ratio exceeds its target by more than the
// slack (30 %), or when moirai's side allocates. scripts/hotpath.sh runs
// it, and .ci/run runs that.
//
// The machine it runs on is shared: other processes take the cores for
// milliseconds at a time, the more so under load. So it never compares a
// baseline timed at one moment with a moirai side timed at another. It
// alternates: each round times a few short stretches of each side, one
// after the other (baseline first in even rounds, moirai first in odd
// ones), and takes the ratio of the two sides' fastest stretches in that
// round; the verdict reads the median of the rounds' ratios (the parallel
// pairs have twice the rounds). A stretch of the uncontended pairs is
// timed by its fastest lap of 256 operations: the cost when nothing else
// ran on the core (the slower laps carry other processes' time). A
// stretch of the parallel pairs runs the loop from every P at once, each
// goroutine on its own thread, and is timed by the threads' CPU time per
// operation: what the operations cost where they ran (cache-line
// transfers, spinning, parking and waking), without the time the threads
// waited for a core, which on a loaded machine is most of a stretch's
// wall-clock time and decides whether they ran at once at all (timed by
// the wall clock, a round's parallel ratio ranged from 0.2 to 5.4 within
// one run at load averages of 6–12).
//
// Usage, from the repository's root:
//
//	go run ./scripts/hotpath [-rounds 15] [-stretches 3] [-stretch 15ms] [-slack 0.30] [-run regexp] [-v]
//
// It prints one line per pair: the fastest stretch of each side over all
// rounds (ns/op; CPU ns/op for the parallel pairs), their ratio, the
// median of the rounds' ratios with their range, the target, the limit
// (target × (1 + slack)), moirai's allocations per operation, and the
// verdict. It is not a timed test: the times of the two sides cancel in
// each ratio. It runs on Linux (a thread's CPU time is RUSAGE_THREAD).
//
//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/moirai-go/moirai"
)

var (
	verbose = flag.Bool("v", false, "print each round's fastest stretches")
	only    = flag.String("run", "", "run only the pairs whose name matches this regexp")
)

// lapOps is the length of a lap of the uncontended pairs.
const lapOps = 256

// batch is how many operations a parallel worker runs between looks at
// the stop flag.
const batch = 128

// loop runs n operations of one side.
type loop func(n int)

// side is one side of a pair. worker returns a loop for one goroutine and
// what to call when the goroutine is done with it (the uncontended pairs
// call it once).
type side struct {
	worker func() (loop, func())
}

// pair is a baseline and moirai's primitive doing the same thing.
type pair struct {
	name     string
	target   float64
	parallel bool
	baseline side
	moirai   side
}

func pairs(ctl *moirai.Controller) []pair {
	begin := func() (context.Context, func()) {
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		return ctx, func() { t.End(nil) }
	}
	nothing := func() {}
	mutexBase := func() side {
		var mu sync.Mutex
		return side{func() (loop, func()) {
			return func(n int) {
				for range n {
					mu.Lock()
					//lint:ignore SA2001 an empty critical section is the baseline's point
					mu.Unlock()
				}
			}, nothing
		}}
	}
	mutexMoirai := func(name string) side {
		mu := ctl.Mutex(name)
		return side{func() (loop, func()) {
			ctx, end := begin()
			return func(n int) {
				for range n {
					if err := mu.Lock(ctx); err != nil {
						fail("%s: Lock: %v", name, err)
					}
					mu.Unlock()
				}
			}, end
		}}
	}
	semBase := func(units int64) side {
		s := semaphore.NewWeighted(units)
		ctx := context.Background()
		return side{func() (loop, func()) {
			return func(n int) {
				for range n {
					if err := s.Acquire(ctx, 1); err != nil {
						fail("semaphore: Acquire: %v", err)
					}
					s.Release(1)
				}
			}, nothing
		}}
	}
	semMoirai := func(name string, units int64) side {
		s := ctl.Semaphore(name, units)
		return side{func() (loop, func()) {
			ctx, end := begin()
			return func(n int) {
				for range n {
					p, err := s.Acquire(ctx, 1)
					if err != nil {
						fail("%s: Acquire: %v", name, err)
					}
					if err := p.Release(); err != nil {
						fail("%s: Release: %v", name, err)
					}
				}
			}, end
		}}
	}
	// The same loops as bench_test.go's BenchmarkMutex, BenchmarkSemaphore
	// and their Parallel forms (a semaphore of 10 units alone, of 2 from
	// every P).
	return []pair{
		{"Mutex", 2.0, false, mutexBase(), mutexMoirai("mutex")},
		{"Semaphore", 1.3, false, semBase(10), semMoirai("semaphore", 10)},
		{"MutexParallel", 1.5, true, mutexBase(), mutexMoirai("mutex-parallel")},
		{"SemaphoreParallel", 1.5, true, semBase(2), semMoirai("semaphore-parallel", 2)},
	}
}

// serial times one stretch of an uncontended side: its fastest lap, in
// ns/op.
func serial(l loop, d time.Duration) float64 {
	best := math.Inf(1)
	for end := time.Now().Add(d); ; {
		t0 := time.Now()
		l(lapOps)
		t1 := time.Now()
		best = min(best, float64(t1.Sub(t0))/lapOps)
		if t1.After(end) {
			return best
		}
	}
}

// parallel times one stretch of a side run from procs goroutines at once,
// each on its own thread: the threads' CPU time per operation. On a
// loaded machine the wall-clock time of a stretch is mostly the time the
// threads waited for a core, and whether both ran at once is up to the
// kernel; their CPU time is what the operations cost where they ran:
// cache-line transfers, spinning, parking and waking.
func parallel(s side, procs int, d time.Duration) float64 {
	var stop atomic.Bool
	var ops, cpu atomic.Int64
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for range procs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			l, end := s.worker()
			defer end()
			ready.Done()
			<-start
			c0 := threadCPU()
			n := 0
			for !stop.Load() {
				l(batch)
				n += batch
			}
			cpu.Add(int64(threadCPU() - c0))
			ops.Add(int64(n))
		}()
	}
	ready.Wait()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	done.Wait()
	return float64(cpu.Load()) / float64(ops.Load())
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		fail("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// allocs returns moirai's allocations per operation over a stretch of
// at least n operations (from every P at once for a parallel pair),
// rounded down as testing.AllocsPerRun does: the controller's goroutine
// allocates now and then.
func allocs(p pair, n int) uint64 {
	var a, b runtime.MemStats
	if p.parallel {
		var ops atomic.Int64
		s := side{func() (loop, func()) {
			l, end := p.moirai.worker()
			return func(k int) { l(k); ops.Add(int64(k)) }, end
		}}
		parallel(s, runtime.GOMAXPROCS(0), time.Millisecond) // warm
		ops.Store(0)
		runtime.ReadMemStats(&a)
		for ops.Load() < int64(n) {
			parallel(s, runtime.GOMAXPROCS(0), 5*time.Millisecond)
		}
		runtime.ReadMemStats(&b)
		return (b.Mallocs - a.Mallocs) / uint64(ops.Load())
	}
	l, end := p.moirai.worker()
	defer end()
	l(lapOps) // warm
	runtime.ReadMemStats(&a)
	l(n)
	runtime.ReadMemStats(&b)
	return (b.Mallocs - a.Mallocs) / uint64(n)
}

// result is one pair's measurements.
type result struct {
	base, moir float64   // fastest stretch of each side over all rounds
	ratios     []float64 // per round: fastest moirai stretch / fastest baseline stretch
	allocs     uint64
}

func measure(p pair, rounds, stretches int, d time.Duration) result {
	procs := runtime.GOMAXPROCS(0)
	var bl, ml loop
	if !p.parallel {
		var bend, mend func()
		bl, bend = p.baseline.worker()
		ml, mend = p.moirai.worker()
		defer bend()
		defer mend()
	}
	time1 := func(s side, l loop) float64 {
		if p.parallel {
			return parallel(s, procs, d)
		}
		return serial(l, d)
	}
	if p.parallel {
		// A parallel stretch varies more (whether the other goroutines
		// ran at the same time is up to the machine): twice the rounds.
		rounds *= 2
	}
	r := result{base: math.Inf(1), moir: math.Inf(1)}
	time1(p.baseline, bl) // warm both sides up
	time1(p.moirai, ml)
	for round := range rounds {
		b, m := math.Inf(1), math.Inf(1)
		for range stretches {
			if round%2 == 0 {
				b = min(b, time1(p.baseline, bl))
				m = min(m, time1(p.moirai, ml))
			} else {
				m = min(m, time1(p.moirai, ml))
				b = min(b, time1(p.baseline, bl))
			}
		}
		if *verbose {
			fmt.Printf("  %s round %d: baseline %.2f moirai %.2f ns/op\n", p.name, round, b, m)
		}
		r.base, r.moir = min(r.base, b), min(r.moir, m)
		r.ratios = append(r.ratios, m/b)
	}
	r.allocs = allocs(p, 100_000)
	return r
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hotpath: "+format+"\n", args...)
	os.Exit(2)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "unknown"
	}
	var l1, l5, l15 string
	fmt.Sscan(string(b), &l1, &l5, &l15)
	return l1 + " " + l5 + " " + l15
}

func main() {
	rounds := flag.Int("rounds", 15, "rounds of alternation per pair")
	stretches := flag.Int("stretches", 3, "stretches of each side per round")
	stretch := flag.Duration("stretch", 15*time.Millisecond, "length of a stretch")
	slack := flag.Float64("slack", 0.30, "allowed excess of a ratio over its target")
	report := flag.String("report", "", "pairs whose name matches this regexp are measured and printed, their ratio never fails (an allocation still does)")
	flag.Parse()
	if *rounds < 1 || *stretches < 1 || *stretch <= 0 || *slack < 0 {
		fail("-rounds, -stretches and -stretch must be positive, -slack not negative")
	}

	ctl := moirai.New()
	defer ctl.Close()
	ps := pairs(ctl)
	fmt.Printf("load: %s; GOMAXPROCS %d; %d rounds × %d stretches of %v per side\n",
		loadavg(), runtime.GOMAXPROCS(0), *rounds, *stretches, *stretch)
	fmt.Printf("%-18s %9s %9s %6s %7s %-11s %6s %5s %6s  %s\n",
		"benchmark", "baseline", "moirai", "ratio", "median", "range", "target", "limit", "allocs", "verdict")
	bad := false
	match, err := regexp.Compile(*only)
	if err != nil {
		fail("-run: %v", err)
	}
	var reported *regexp.Regexp
	if *report != "" {
		if reported, err = regexp.Compile(*report); err != nil {
			fail("-report: %v", err)
		}
	}
	for _, p := range ps {
		if !match.MatchString(p.name) {
			continue
		}
		runtime.GC()
		r := measure(p, *rounds, *stretches, *stretch)
		med := median(r.ratios)
		limit := p.target * (1 + *slack)
		verdict := "ok"
		switch {
		case r.allocs > 0:
			verdict, bad = "FAIL: allocates", true
		case reported != nil && reported.MatchString(p.name) && med > p.target:
			verdict = "over target (reported only)"
		case reported != nil && reported.MatchString(p.name):
			verdict = "ok (reported only)"
		case med > limit:
			verdict, bad = "FAIL: ratio", true
		}
		fmt.Printf("%-18s %9.2f %9.2f %6.2f %7.2f %-11s %6.2f %5.2f %6d  %s\n",
			p.name, r.base, r.moir, r.moir/r.base, med,
			fmt.Sprintf("%.2f-%.2f", slices.Min(r.ratios), slices.Max(r.ratios)),
			p.target, limit, r.allocs, verdict)
	}
	fmt.Printf("load after: %s\n", loadavg())
	if bad {
		os.Exit(1)
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
)

// SoakOptions configure a soak: the cases run again and again, several at
// once, under one controller configuration, while the process's health is
// sampled.
type SoakOptions struct {
	Cases      []Case
	Controller Controller
	// Duration is the soak's length (default 10 minutes); Run the length
	// of each case's run (default 6 s); Parallel how many cases run at
	// once (default 3), each with its culprit; Load the multiplier of the
	// cases' light rates (default 2: twice their normal load).
	Duration, Run time.Duration
	Parallel      int
	Load          float64
	// Sample is the sampling period of the health (default 1 s); Warmup
	// the start of the soak left out of the flatness checks (default a
	// fifth of the duration).
	Sample, Warmup time.Duration
	Seed           uint64
	// Progress, if set, is told the elapsed time and the runs done.
	Progress func(elapsed time.Duration, runs int)
}

// SoakSample is the process's health at one moment of a soak.
type SoakSample struct {
	T          time.Duration `json:"t_ns"`
	Goroutines int           `json:"goroutines"`
	HeapLive   uint64        `json:"heap_live_bytes"` // live heap after the last GC
	FDs        int           `json:"fds"`             // open file descriptors (-1: unknown)
	Live       int           `json:"live_tasks"`      // tasks live in the controllers running
}

// SoakRun is one case's run during a soak.
type SoakRun struct {
	Case        string        `json:"case"`
	Start       time.Duration `json:"start_ns"`
	Throughput  float64       `json:"throughput"` // light requests ok per second
	P99Ms       float64       `json:"p99_ms"`
	Victims     int           `json:"victims_cancelled"`
	VictimNotes []string      `json:"victim_notes,omitempty"` // the controller's reasons`
	Culprits    int           `json:"culprits_cancelled"`
	LeakedSlots int64         `json:"leaked_slots"` // worker slots held after every handler returned
	Unended     string        `json:"unended,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// SoakCheck is one of the soak's verdicts.
type SoakCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}

// SoakResult is what a soak measured and concluded.
type SoakResult struct {
	Controller string       `json:"controller"`
	Duration   string       `json:"duration"`
	Samples    []SoakSample `json:"samples"`
	// Boundaries are samples taken between rounds, after a garbage
	// collection, when no case runs: what is left is what leaked.
	Boundaries []SoakSample `json:"boundaries"`
	Runs       []SoakRun    `json:"runs"`
	Checks     []SoakCheck  `json:"checks"`
}

// OK reports whether every check passed.
func (r *SoakResult) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Soak runs the cases round after round, Parallel at a time (a ProcessWide
// case alone), each with its culprit at Load times its rate, until
// Duration has passed, sampling the goroutines, the live heap, the open
// descriptors and the live tasks every Sample, and again between rounds
// after a garbage collection. It then checks that they stayed flat after
// the warm-up (between rounds: the
// mean of the last third of the samples within 5 % of the first third's,
// or within a small absolute slack: 20 goroutines, 4 MiB, 8 descriptors,
// 64 tasks), that no run cancelled a victim, leaked a worker slot or left
// a task unended, and that no case's p99 drifted up (the median of its
// last half of runs after the warm-up above 1.5 times the first half's and
// above its objective).
func Soak(ctx context.Context, o SoakOptions) (*SoakResult, error) {
	if len(o.Cases) == 0 {
		return nil, errors.New("bench: soak of no case")
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Minute
	}
	if o.Run <= 0 {
		o.Run = 6 * time.Second
	}
	if o.Run < MinDuration {
		return nil, fmt.Errorf("bench: soak runs of %v are too short; the minimum is %v", o.Run, MinDuration)
	}
	if o.Parallel <= 0 {
		o.Parallel = 3
	}
	if o.Load <= 0 {
		o.Load = 2
	}
	if o.Sample <= 0 {
		o.Sample = time.Second
	}
	if o.Warmup <= 0 || o.Warmup >= o.Duration {
		o.Warmup = o.Duration / 5
	}
	res := &SoakResult{Controller: o.Controller.Name, Duration: o.Duration.String()}
	start := time.Now()

	var (
		mu   sync.Mutex
		live = map[*moirai.Controller]bool{}
	)
	watch := func(c *moirai.Controller) func(error, int64) {
		mu.Lock()
		live[c] = true
		mu.Unlock()
		return func(error, int64) {
			mu.Lock()
			delete(live, c)
			mu.Unlock()
		}
	}
	sample := func() SoakSample {
		s := SoakSample{T: time.Since(start), Goroutines: runtime.NumGoroutine(), HeapLive: heapLive(), FDs: openFDs()}
		mu.Lock()
		for c := range live {
			s.Live += c.Stats().Live
		}
		mu.Unlock()
		return s
	}
	sampled := make(chan struct{})
	sctx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampled)
		t := time.NewTicker(o.Sample)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				s := sample()
				mu.Lock()
				res.Samples = append(res.Samples, s)
				mu.Unlock()
			}
		}
	}()

	next := 0
	for round := 0; time.Since(start) < o.Duration && ctx.Err() == nil; round++ {
		var wg sync.WaitGroup
		for _, c := range soakRound(o.Cases, &next, o.Parallel) {
			at := time.Since(start)
			opts := Options{Duration: o.Run, Seed: o.Seed + uint64(round), Load: o.Load}
			var closeErr error
			var leaked int64
			opts.watch = func(mc *moirai.Controller) func(error, int64) {
				over := watch(mc)
				return func(err error, slots int64) {
					closeErr, leaked = err, slots
					over(err, slots)
				}
			}
			wg.Go(func() {
				run, err := runOne(ctx, c, o.Controller, true, opts)
				r := SoakRun{Case: c.Name, Start: at, LeakedSlots: leaked}
				if closeErr != nil {
					r.Unended = closeErr.Error()
				}
				if err != nil {
					r.Error = err.Error()
				} else {
					r.Throughput, r.P99Ms = run.Light.Throughput, run.Light.P99Ms
					for _, e := range run.Events {
						switch e.Kind {
						case "cancel-victim":
							r.Victims++
							r.VictimNotes = append(r.VictimNotes, e.Note)
						case "cancel-culprit":
							r.Culprits++
						}
					}
				}
				mu.Lock()
				res.Runs = append(res.Runs, r)
				mu.Unlock()
			})
		}
		wg.Wait()
		runtime.GC()
		b := sample()
		mu.Lock()
		res.Boundaries = append(res.Boundaries, b)
		mu.Unlock()
		if o.Progress != nil {
			mu.Lock()
			n := len(res.Runs)
			mu.Unlock()
			o.Progress(time.Since(start), n)
		}
	}
	stopSampling()
	<-sampled
	if err := ctx.Err(); err != nil {
		return res, err
	}
	slices.SortFunc(res.Runs, func(a, b SoakRun) int { return int(a.Start - b.Start) })
	res.Checks = soakChecks(o, res)
	return res, nil
}

// soakChecks computes the soak's verdicts.
func soakChecks(o SoakOptions, res *SoakResult) []SoakCheck {
	var checks []SoakCheck
	// Flatness is judged on the samples between rounds, when no case
	// runs and a collection has just run: the load's own ups and downs
	// are gone and what grows is a leak. Without enough of them (a short
	// soak), on the per-second samples.
	src, where := res.Boundaries, "between rounds"
	var after []SoakSample
	for _, s := range src {
		if s.T >= o.Warmup {
			after = append(after, s)
		}
	}
	if len(after) < 3 {
		src, where, after = res.Samples, "sampled every "+o.Sample.String(), nil
		for _, s := range src {
			if s.T >= o.Warmup {
				after = append(after, s)
			}
		}
	}
	flat := func(name, unit string, slack float64, v func(SoakSample) float64) {
		if len(after) < 3 {
			checks = append(checks, SoakCheck{name, false, fmt.Sprintf("%d samples after the warm-up: too few to tell", len(after))})
			return
		}
		third := max(len(after)/3, 1)
		mean := func(ss []SoakSample) float64 {
			sum := 0.0
			for _, s := range ss {
				sum += v(s)
			}
			return sum / float64(len(ss))
		}
		first, last := mean(after[:third]), mean(after[len(after)-third:])
		growth := last - first
		ok := growth <= slack || (first > 0 && growth/first <= 0.05)
		checks = append(checks, SoakCheck{name, ok, fmt.Sprintf("%s: mean %.1f%s in the first third after the warm-up, %.1f%s in the last (%+.1f %%; slack %.0f%s)",
			where, first, unit, last, unit, 100*growth/max(first, 1e-9), slack, unit)})
	}
	flat("goroutines", "", 20, func(s SoakSample) float64 { return float64(s.Goroutines) })
	flat("heap", " MiB", 4, func(s SoakSample) float64 { return float64(s.HeapLive) / (1 << 20) })
	if len(after) > 0 && after[0].FDs >= 0 {
		flat("descriptors", "", 8, func(s SoakSample) float64 { return float64(s.FDs) })
	}
	flat("live tasks", "", 64, func(s SoakSample) float64 { return float64(s.Live) })

	var victims, failed, unended int
	var leaked int64
	for _, r := range res.Runs {
		victims += r.Victims
		leaked += r.LeakedSlots
		if r.Error != "" {
			failed++
		}
		if r.Unended != "" {
			unended++
		}
	}
	checks = append(checks,
		SoakCheck{"victims", victims == 0, fmt.Sprintf("%d victims cancelled in %d runs", victims, len(res.Runs))},
		SoakCheck{"slots", leaked == 0, fmt.Sprintf("%d worker slots held after the runs' handlers returned", leaked)},
		SoakCheck{"tasks", unended == 0, fmt.Sprintf("%d runs left tasks unended at Close", unended)},
		SoakCheck{"runs", failed == 0, fmt.Sprintf("%d of %d runs failed", failed, len(res.Runs))},
	)
	// Each case's p99 must not drift up: the median p99 of its runs in
	// the last half after the warm-up at most 1.5 times the first half's,
	// or within the case's objective. (Single runs vary widely at twice
	// the load with other cases beside them; a drift is a trend.)
	slo := map[string]time.Duration{}
	for _, c := range o.Cases {
		slo[c.Name] = c.slo()
	}
	byCase := map[string][]float64{}
	var names []string
	for _, r := range res.Runs { // sorted by start
		if r.Error == "" && r.Start >= o.Warmup {
			if _, ok := byCase[r.Case]; !ok {
				names = append(names, r.Case)
			}
			byCase[r.Case] = append(byCase[r.Case], r.P99Ms)
		}
	}
	var drift []string
	checked := 0
	for _, name := range names {
		ps := byCase[name]
		if len(ps) < 4 {
			continue
		}
		checked++
		first, last := median(ps[:len(ps)/2]), median(ps[len(ps)/2:])
		if lim := float64(slo[name]) / float64(time.Millisecond); last > 1.5*first && last > lim {
			drift = append(drift, fmt.Sprintf("%s: median p99 %.1f ms in the first half, %.1f in the last (objective %.0f)", name, first, last, lim))
		}
	}
	text := fmt.Sprintf("no drift: each of %d cases' median p99 in the last half of its runs within 1.5× the first half's or its objective", checked)
	if checked == 0 {
		text = "too few runs per case after the warm-up to tell (4 needed)"
	}
	if len(drift) > 0 {
		text = fmt.Sprintf("%d cases drifted: %v", len(drift), drift)
	}
	checks = append(checks, SoakCheck{"p99", len(drift) == 0, text})
	return checks
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// heapLive is the live heap after the last garbage collection.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// openFDs counts this process's open descriptors, or -1 where /proc is
// missing.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// soakRound returns the next round's cases, taken in turn from cases
// starting at *next, which it advances: up to parallel of them, except
// that a process-wide case (Case.ProcessWide) runs alone, since the
// others would contend for its resource without its controller seeing.
func soakRound(cases []Case, next *int, parallel int) []Case {
	var round []Case
	for len(round) < min(parallel, len(cases)) {
		c := cases[*next%len(cases)]
		if c.ProcessWide && len(round) > 0 {
			break
		}
		round = append(round, c)
		*next++
		if c.ProcessWide {
			break
		}
	}
	return round
}

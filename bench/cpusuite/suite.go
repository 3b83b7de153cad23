// Package cpusuite is the `cpu` suite of the project's CASES.md: K real
// processes on one host, each running an open-loop CPU-bound workload
// through a worker pool of package cpu, measured per work item.
//
// # A run
//
// A run is one (case, controller) pair: case kK starts K processes at
// once (the parent's [Options].Command builds each one's command line;
// `moirai bench run --suite cpu` re-executes the moirai binary with the
// hidden subcommand `bench worker-cpu`). Every process runs [Worker]: from
// a common start instant, work items arrive as a Poisson stream (seeded
// per process) at a rate that offers the host [Options].Load of its CPUs
// in total, K·rate·item = Load·CPUs; each item computes fib(n), a few
// milliseconds of real CPU work. The process prints a [WorkerResult] as
// JSON and exits; the parent merges the K results into one [bench.Row].
//
// # What is measured
//
// Per item, after a warm-up: the work latency (from the item's start on a
// worker to its end: how much the CPU was shared while it ran), the queue
// latency (from its arrival to its start), and whether it completed
// within the run. A row holds the p99 and maximum work latency and the
// p99 queue latency over the items of all K processes, the throughput of
// all of them summed, the friendly pools' mean active count, and the cost
// of their control loops as a share of one CPU.
//
// # Controllers
//
//   - ignorant: a static pool of as many workers as the budget (the
//     host's CPUs here): what a process that believes it owns the host
//     runs;
//   - optimal: a static pool of budget / K workers (at least 1): what an
//     oracle that knows the neighbours would run;
//   - friendly-oO: the neighbour-aware pool of package cpu with
//     overcommit factor O (1 and 2).
//
// # Neighbours that are not pools
//
// Case hog runs one measured process beside a plain CPU hog (a process
// spinning one thread for the whole run), case rogue beside a process
// that runs the same work through a pool of as many workers as the host
// has CPUs, whatever the controller. Neither neighbour is measured;
// optimal is then the CPUs the hog leaves, split among the processes
// that run work.
//
// # Rounds and the trace
//
// The results' params hold every pair's p99, throughput and background
// round by round, and a friendly pool's ratios to the static pools of the
// same round, with their median and min–max. With the environment
// variable MOIRAI_CPU_TRACE naming a directory, every friendly process
// writes its loop's ticks there ([TraceEnv]).
package cpusuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/cpu"
)

// Suite is the suite's name.
const Suite = "cpu"

// Case is a number of processes under the controller and the neighbours
// beside them that are not moirai pools.
type Case struct {
	Name string
	// K is the number of processes run under the controller, measured.
	K int
	// Hogs is the number of neighbour processes that each spin one
	// thread for the whole run: a plain CPU hog, no pool at all.
	Hogs int
	// Rogues is the number of neighbour processes that run the same
	// work as the measured ones through a pool of as many workers as
	// the host has CPUs, whatever the controller: a pool that ignores
	// its budget. Neither kind of neighbour is measured.
	Rogues int
}

// Cases returns k1 to k4 (K processes under the controller, nothing
// else), hog (one process beside a plain CPU hog) and rogue (one beside
// a pool that ignores its budget).
func Cases() []Case {
	return []Case{{Name: "k1", K: 1}, {Name: "k2", K: 2}, {Name: "k3", K: 3}, {Name: "k4", K: 4},
		{Name: "hog", K: 1, Hogs: 1}, {Name: "rogue", K: 1, Rogues: 1}}
}

// rate is the arrival rate of each process of case c that runs work: the
// load offered to the CPUs the hogs leave, shared equally among them.
func (c Case) rate(load, cpus float64, item time.Duration) float64 {
	return load * max(cpus-float64(c.Hogs), 1) / float64(c.K+c.Rogues) / item.Seconds()
}

// optimal is the size of the static pool of an oracle that knows its
// neighbours: the CPUs the hogs leave, split equally among the processes
// that run work, at least 1.
func (c Case) optimal(cpus float64) int {
	return max(1, int(math.Round((cpus-float64(c.Hogs))/float64(c.K+c.Rogues))))
}

// Controller is a pool configuration every process of a run uses.
type Controller struct {
	Name       string
	Describe   string
	Pool       string
	Overcommit float64
	Tolerance  float64
	Fixed      int // the static pool's size (Pool "static")
}

// Controllers returns ignorant, optimal, and friendly with O of 1
// and 2.
func Controllers() []Controller {
	out := []Controller{
		{Name: "ignorant", Pool: "ignorant", Describe: "static pool of as many workers as the CPU budget"},
		{Name: "optimal", Pool: "optimal", Describe: "static pool of an oracle's size: the CPUs the hogs leave, split among the processes that run work"},
	}
	for _, o := range []float64{1, 2} {
		s := strconv.FormatFloat(o, 'f', -1, 64)
		out = append(out, Controller{Name: "friendly-o" + s, Pool: "friendly", Overcommit: o,
			Describe: "neighbour-aware pool (package cpu), overcommit factor " + s})
	}
	return out
}

// SelectCases resolves a comma-separated list of case names, or "all".
func SelectCases(list string) ([]Case, error) {
	return bench.SelectByName(list, "case of suite cpu", Cases(), func(c Case) string { return c.Name })
}

// SelectControllers resolves a comma-separated list of controller names,
// or "all". static-N, a static pool of N workers in every process that
// runs work (1 ≤ N ≤ 64), is accepted too, for a sweep of the fixed pools
// between optimal's size and ignorant's.
func SelectControllers(list string) ([]Controller, error) {
	var out, static []Controller
	var named []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if k, ok := strings.CutPrefix(n, "static-"); ok {
			size, err := strconv.Atoi(k)
			if err != nil || size < 1 || size > 64 {
				return nil, fmt.Errorf("%w: controller %q of suite cpu: want static-N, 1 ≤ N ≤ 64", bench.ErrUnknown, n)
			}
			static = append(static, Controller{Name: n, Pool: "static", Fixed: size, Describe: fmt.Sprintf("static pool of %d workers", size)})
			continue
		}
		named = append(named, n)
	}
	if len(named) > 0 || len(static) == 0 {
		var err error
		out, err = bench.SelectByName(strings.Join(named, ","), "controller of suite cpu", Controllers(), func(c Controller) string { return c.Name })
		if err != nil {
			return nil, err
		}
	}
	return append(out, static...), nil
}

// Options configure an invocation of the suite.
type Options struct {
	Cases       []Case
	Controllers []Controller
	// Duration is the length of each run, Warmup its unmeasured start.
	Duration, Warmup time.Duration
	// Rounds is how many times every (case, controller) pair runs; the
	// rounds are interleaved (every pair once, then again), so that a
	// change in the machine's background load falls on every controller
	// alike. A row merges its pair's rounds.
	Rounds int
	Seed   uint64
	// Fib is the size of a work item (fib(Fib)); Load the offered load as
	// a fraction of the host's CPUs.
	Fib  int
	Load float64
	// Command returns the command that runs one process of a run: it
	// must run [Worker] with cfg and print its result as JSON on
	// standard output.
	Command func(ctx context.Context, cfg WorkerConfig) *exec.Cmd
	// Progress, if set, is told what runs.
	Progress func(done, total int, what string)

	// For tests: the item's time instead of calibrating, how long to
	// measure the loop's cost (default 2 s), and how long the processes
	// get to start (default 500 ms).
	calibrated, loopCost, startLead time.Duration
}

// Defaults of the suite: items of fib(30), about 4 ms on the 2-CPU VM
// the results were measured on, offered at 90 % of the host's CPUs.
const (
	DefaultFib  = 30
	DefaultLoad = 0.9
)

// Execute runs every case under every controller, Rounds times, and
// returns the results. A run that fails fails its row; the others go on.
// ctx cancels the invocation (the processes are killed).
func Execute(ctx context.Context, o Options) (*bench.Results, error) {
	if o.Duration < 100*time.Millisecond || o.Warmup < 0 || o.Warmup >= o.Duration/2 {
		return nil, fmt.Errorf("cpusuite: duration %v with warm-up %v: want at least 100ms, and a warm-up under half of it", o.Duration, o.Warmup)
	}
	if o.Fib < 1 || o.Fib > 45 || !(o.Load > 0) || o.Load > 4 {
		return nil, fmt.Errorf("cpusuite: fib(%d) at load %v: want fib 1 to 45 and a load in (0, 4]", o.Fib, o.Load)
	}
	o.Rounds = max(o.Rounds, 1)
	budget := cpu.ReadBudget(os.DirFS("/"))
	item, alone := o.calibrated, o.calibrated
	if item == 0 {
		alone = Calibrate(o.Fib)
		item = CalibrateParallel(o.Fib, int(math.Ceil(budget.CPUs)))
	}
	if o.loopCost == 0 {
		o.loopCost = 2 * time.Second
	}
	loop, loopErr := LoopCost(ctx, o.loopCost)
	loopText := fmt.Sprintf("%.3f%% of one CPU (process CPU time over %v of a friendly pool whose loop ticks and no work runs, getrusage)", loop, o.loopCost)
	if loopErr != nil {
		loopText = "not measured: " + loopErr.Error()
	}
	res := &bench.Results{
		Suite: Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(),
		Params: map[string]string{
			"work item":         fmt.Sprintf("fib(%d), %.2f ms on each CPU with every CPU running one (median of 15 a CPU; %.2f ms alone, the fastest of 15): the offered load is a fraction of that capacity", o.Fib, float64(item)/1e6, float64(alone)/1e6),
			"offered load":      fmt.Sprintf("%.0f%% of %s CPUs (%s), Poisson arrivals", 100*o.Load, cpu.FormatCPUs(budget.CPUs), budget.Limit),
			"warm-up":           o.Warmup.String() + " of each run, not measured",
			"rounds":            fmt.Sprintf("%d, interleaved, each starting one controller further; a row holds the median over its rounds of each round's figures (throughput: the mean)", o.Rounds),
			"ignorant pool":     fmt.Sprintf("%d workers per process", int(math.Ceil(budget.CPUs))),
			"clock tick":        clockTick(),
			"control loop cost": loopText,
		},
	}
	type key struct{ c, ctl int }
	acc := map[key][]*WorkerResult{}
	backs := map[key][]float64{}
	failed := map[key]error{}
	total, done := o.Rounds*len(o.Cases)*len(o.Controllers), 0
	for round := range o.Rounds {
		for ci, c := range o.Cases {
			rate := c.rate(o.Load, budget.CPUs, item)
			// Each round starts the controllers one further along, so
			// that no controller always runs first (right after a case's
			// processes change) or last.
			for j := range o.Controllers {
				ki := (j + round) % len(o.Controllers)
				ctl := o.Controllers[ki]
				if err := ctx.Err(); err != nil {
					return res, err
				}
				if o.Progress != nil {
					o.Progress(done, total, fmt.Sprintf("round %d/%d %s: %s", round+1, o.Rounds, c.Name, ctl.Name))
				}
				done++
				k := key{ci, ki}
				if failed[k] != nil {
					continue
				}
				rs, back, err := runOne(ctx, o, c, ctl, rate, c.optimal(budget.CPUs))
				if err != nil {
					failed[k] = err
					continue
				}
				acc[k] = append(acc[k], rs...)
				backs[k] = append(backs[k], back)
			}
		}
	}
	for ci, c := range o.Cases {
		rate := c.rate(o.Load, budget.CPUs, item)
		prs := map[string]perRound{}
		for ki, ctl := range o.Controllers {
			k := key{ci, ki}
			if err := failed[k]; err != nil {
				res.Rows = append(res.Rows, bench.Row{Suite: Suite, Case: c.Name, Controller: ctl.Name, Error: err.Error()})
				continue
			}
			row, pr := mergeRounds(c, ctl, rate, o.Rounds, acc[k])
			row.Background = mean(backs[k])
			res.Rows = append(res.Rows, row)
			pr.back = backs[k]
			prs[ctl.Name] = pr
		}
		roundParams(res.Params, c, o.Controllers, prs)
	}
	if o.Progress != nil {
		o.Progress(total, total, "done")
	}
	return res, nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Calibrate returns how long fib(n) takes on one CPU: the fastest of 15
// runs after 3 unmeasured ones (on a shared machine the others are
// stretched by the neighbours, which the suite is about).
func Calibrate(n int) time.Duration {
	for range 3 {
		sink.Add(int64(Fib(n)))
	}
	ds := make([]time.Duration, 15)
	for i := range ds {
		s := time.Now()
		sink.Add(int64(Fib(n)))
		ds[i] = time.Since(s)
	}
	return slices.Min(ds)
}

// CalibrateParallel returns how long fib(n) takes on each of cpus CPUs
// running it at once: the median of 15 runs a thread, after 3 unmeasured
// ones. It is the item's time the host's capacity is made of, which the
// offered load is a fraction of: on a virtual machine whose CPUs share a
// core or a host, an item alone runs faster than one beside another (on
// the 2-CPU development VM 3.7 ms alone and 4.3–5.5 ms beside another),
// and a load set from the lone item's time offered more than the two
// CPUs could serve, so that every pool's queue grew for the whole run.
func CalibrateParallel(n, cpus int) time.Duration {
	cpus = max(cpus, 1)
	ds := make([][]time.Duration, cpus)
	var wg sync.WaitGroup
	for c := range cpus {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range 3 {
				sink.Add(int64(Fib(n)))
			}
			for range 15 {
				s := time.Now()
				sink.Add(int64(Fib(n)))
				ds[c] = append(ds[c], time.Since(s))
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ds...)
	slices.Sort(all)
	return all[len(all)/2]
}

// LoopCost measures what a friendly pool's control loop costs: the
// process's CPU time over d while a pool holds one piece of work that
// only waits (so the loop ticks, and nothing else runs), in percent of
// one CPU. It includes everything the loop does at each tick: the
// timer's wake-up of the loop's goroutine, the two reads of /proc, the
// policy.
func LoopCost(ctx context.Context, d time.Duration) (float64, error) {
	p, err := cpu.NewPool()
	if err != nil {
		return 0, err
	}
	defer p.Close()
	hold, release := context.WithCancel(ctx)
	defer release()
	p.Go(hold, func(ctx context.Context) { <-ctx.Done() })
	c0, t0 := processCPUTime(), time.Now()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return 0, ctx.Err()
	}
	c1, el := processCPUTime(), time.Since(t0)
	if c1 == 0 {
		return 0, errors.New("no process CPU time on this system")
	}
	return 100 * float64(c1-c0) / float64(el), nil
}

func clockTick() string {
	hz, err := cpu.ReadClockTick("/")
	if err != nil {
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("%d Hz (the friendly pools' loop period)", hz)
}

// hostBusy returns the host's busy CPU time so far, or 0 if it cannot be
// read.
func hostBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	ticks, err := cpu.ParseStat(data)
	if err != nil || tickHz() == 0 {
		return 0
	}
	return time.Duration(ticks) * time.Second / time.Duration(tickHz())
}

var tickHz = sync.OnceValue(func() int {
	hz, err := cpu.ReadClockTick("/")
	if err != nil {
		return 0
	}
	return hz
})

// runOne runs K processes under one controller and returns their results
// and the CPUs the rest of the host kept busy meanwhile.
func runOne(ctx context.Context, o Options, c Case, ctl Controller, rate float64, optimal int) ([]*WorkerResult, float64, error) {
	// Every process starts its arrivals at the same instant, leaving them
	// time to start.
	lead := o.startLead
	if lead == 0 {
		lead = 500 * time.Millisecond
	}
	startAt := time.Now().Add(lead)
	rctx, cancel := context.WithTimeout(ctx, o.Duration+20*time.Second)
	defer cancel()
	n := c.K + c.Hogs + c.Rogues
	results := make([]*WorkerResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var busy0 time.Duration
	var t0 time.Time
	for i := range n {
		cfg := WorkerConfig{
			Pool: ctl.Pool, Overcommit: ctl.Overcommit, Tolerance: ctl.Tolerance, Fixed: ctl.Fixed, K: c.K, Index: i, Seed: o.Seed,
			Rate: rate, Fib: o.Fib, StartAt: startAt.UnixNano(), Duration: o.Duration, Warmup: o.Warmup,
			Optimal: optimal, Case: c.Name, Controller: ctl.Name,
		}
		switch {
		case i >= c.K+c.Rogues:
			cfg.Pool = "hog"
		case i >= c.K:
			cfg.Pool = "ignorant"
		}
		cmd := o.Command(rctx, cfg)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			errs[i] = err
			continue
		}
		wg.Go(func() {
			err := cmd.Wait()
			if err != nil {
				errs[i] = fmt.Errorf("process %d: %w: %s", i, err, strings.TrimSpace(stderr.String()))
				return
			}
			var r WorkerResult
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				errs[i] = fmt.Errorf("process %d: %w: %v", i, errNoResult, err)
				return
			}
			results[i] = &r
		})
	}
	if err := errors.Join(errs...); err != nil {
		cancel()
		wg.Wait()
		return nil, 0, err
	}
	// The host's busy time over the processes' arrivals.
	if d := time.Until(startAt); d > 0 {
		time.Sleep(d)
	}
	busy0, t0 = hostBusy(), time.Now()
	time.Sleep(time.Until(startAt.Add(o.Duration)))
	busy1, el := hostBusy(), time.Since(t0)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	var own time.Duration
	for _, r := range results {
		own += r.CPUTime
	}
	back := 0.0
	if busy0 > 0 && busy1 > busy0 {
		back = max(float64(busy1-busy0-own)/float64(el), 0)
	}
	// The neighbours are part of the case, not measured.
	return results[:c.K], back, nil
}

// merge computes a row from the processes' results of every round
// (rounds × K results, round after round). Each figure is computed per
// round, over the items of the round's K processes, and the row holds the
// median over the rounds: on a shared machine a burst of someone else's
// work can fall on one round, and the median keeps it from deciding the
// row. The throughput is the rounds' mean.
func merge(c Case, ctl Controller, rate float64, rounds int, rs []*WorkerResult) bench.Row {
	row, _ := mergeRounds(c, ctl, rate, rounds, rs)
	return row
}

// perRound is a pair's figures in each round.
type perRound struct {
	p99, tput, back []float64
	// cpu is the processes' CPU time per item, ms.
	cpu []float64
	// loop is each round's friendly loops' summaries, one per process.
	loop []string
}

// mergeRounds is merge, and the per-round figures.
func mergeRounds(c Case, ctl Controller, rate float64, rounds int, rs []*WorkerResult) (bench.Row, perRound) {
	row := bench.Row{Suite: Suite, Case: c.Name, Controller: ctl.Name, Offered: rate * float64(c.K)}
	var pr perRound
	var p99, mx, q99, active []float64
	for len(rs) > 0 {
		n := min(c.K, len(rs))
		round := rs[:n]
		rs = rs[n:]
		var work, queue []int32
		a, tput := 0.0, 0.0
		for _, r := range round {
			work = append(work, r.Work...)
			queue = append(queue, r.Queue...)
			if r.Measured > 0 {
				tput += float64(r.Completed) / r.Measured
			}
			a += r.ActiveMean
		}
		var cpuTime time.Duration
		ran := 0
		for _, r := range round {
			cpuTime += r.CPUTime
			ran += r.Ran
		}
		if ran > 0 {
			pr.cpu = append(pr.cpu, float64(cpuTime)/1e6/float64(ran))
		}
		var loops []string
		for i, r := range round {
			if r.Loop != nil {
				loops = append(loops, fmt.Sprintf("p%d %s", i, r.Loop))
			}
		}
		if len(loops) > 0 {
			pr.loop = append(pr.loop, strings.Join(loops, " | "))
		}
		row.Throughput += tput
		pr.tput = append(pr.tput, tput)
		p99 = append(p99, quantile(work, 0.99))
		mx = append(mx, quantile(work, 1))
		q99 = append(q99, quantile(queue, 0.99))
		active = append(active, a)
	}
	row.Throughput /= float64(max(rounds, 1))
	row.P99Ms, row.MaxMs, row.QueueP99Ms = median(p99), median(mx), median(q99)
	row.ActiveMean = mean(active)
	pr.p99 = p99
	return row, pr
}

// spread formats per-round values: each round's, then their median and
// min–max.
func spread(xs []float64, unit string) string {
	if len(xs) == 0 {
		return "–"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', 3, 64)
	}
	return fmt.Sprintf("%s%s (median %.3g, %.3g–%.3g)", strings.Join(parts, ", "), unit, median(xs), slices.Min(xs), slices.Max(xs))
}

// ratios returns a[i]/b[i] for the rounds both have.
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// roundParams records, for each case, every controller's p99 and
// throughput round by round, and a friendly controller's ratios to
// optimal's and ignorant's of the same round, so that the spread between
// rounds is in the results beside the medians.
func roundParams(params map[string]string, c Case, ctls []Controller, prs map[string]perRound) {
	for _, ctl := range ctls {
		pr, ok := prs[ctl.Name]
		if !ok {
			continue
		}
		v := "p99 " + spread(pr.p99, " ms") + "; throughput " + spread(pr.tput, "/s") + "; background " + spread(pr.back, " CPUs") +
			"; process CPU per item " + spread(pr.cpu, " ms")
		if opt, ok := prs["optimal"]; ok && ctl.Pool == "friendly" {
			v += "; p99 / optimal's " + spread(ratios(pr.p99, opt.p99), "")
		}
		if ign, ok := prs["ignorant"]; ok && ctl.Name != "ignorant" {
			v += "; p99 / ignorant's " + spread(ratios(pr.p99, ign.p99), "") + "; throughput / ignorant's " + spread(ratios(pr.tput, ign.tput), "")
		}
		params[fmt.Sprintf("rounds %s %s", c.Name, ctl.Name)] = v
		if len(pr.loop) > 0 {
			parts := make([]string, len(pr.loop))
			for i, l := range pr.loop {
				parts[i] = fmt.Sprintf("round %d: %s", i+1, l)
			}
			params[fmt.Sprintf("loop %s %s", c.Name, ctl.Name)] = "active count: share of the measured ticks at each count; ↑↓ its rises and falls; free, others, share: the loop's means; runq: the process's threads waiting for a CPU, on average; steal: the host's steal, CPUs. " +
				strings.Join(parts, "; ")
		}
		if ctl.Name == checked {
			if v, ok := check(c, pr, prs["optimal"], prs["ignorant"]); ok {
				params["check "+c.Name] = v
			}
		}
	}
}

// checked is the controller the targets are asked of.
const checked = "friendly-o1"

// check says, for a case, whether checked meets the targets in every
// round, against the static pools of the same round: alone (k1) a p99
// at most 1.05× ignorant's and a throughput at least 0.95 of it; with
// neighbours a p99 at most 1.3× optimal's and, where the neighbours are
// pools like it (kK), a throughput at least 1/1.1 of ignorant's. It
// returns false when the static pools did not run.
func check(c Case, pr, opt, ign perRound) (string, bool) {
	type target struct {
		what   string
		xs     []float64
		limit  float64
		atMost bool
	}
	var ts []target
	if len(ign.p99) == 0 {
		return "", false
	}
	if c.Name == "k1" {
		ts = append(ts, target{"p99 ÷ ignorant's", ratios(pr.p99, ign.p99), 1.05, true},
			target{"throughput ÷ ignorant's", ratios(pr.tput, ign.tput), 0.95, false})
	} else {
		if len(opt.p99) == 0 {
			return "", false
		}
		ts = append(ts, target{"p99 ÷ optimal's", ratios(pr.p99, opt.p99), 1.3, true})
		if c.Hogs == 0 && c.Rogues == 0 {
			ts = append(ts, target{"throughput ÷ ignorant's", ratios(pr.tput, ign.tput), 1 / 1.1, false})
		}
	}
	all := true
	var parts []string
	for _, t := range ts {
		ok := 0
		for _, x := range t.xs {
			if (t.atMost && x <= t.limit) || (!t.atMost && x >= t.limit) {
				ok++
			}
		}
		all = all && ok == len(t.xs) && len(t.xs) > 0
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		parts = append(parts, fmt.Sprintf("%s %s %.3g in %d of %d rounds (median %.3g, %.3g–%.3g)",
			t.what, op, t.limit, ok, len(t.xs), median(t.xs), minOf(t.xs), maxOf(t.xs)))
	}
	verdict := "holds in every round"
	if !all {
		verdict = "does NOT hold in every round"
	}
	v := checked + ": " + strings.Join(parts, "; ") + ": " + verdict
	if c.Name == "k1" && len(opt.p99) > 0 {
		// Alone, optimal is ignorant's pool: what the two differ by is
		// the rounds' own noise, the floor under any per-round ratio.
		p, tp := ratios(opt.p99, ign.p99), ratios(opt.tput, ign.tput)
		v += fmt.Sprintf(" (the same static pool run as optimal and as ignorant, round by round: p99 ratio %.3g–%.3g, throughput ratio %.3g–%.3g)",
			minOf(p), maxOf(p), minOf(tp), maxOf(tp))
	}
	return v, true
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Min(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// Checks returns the results' per-round checks of the targets ("check
// CASE" params), in the order of the cases' names.
func Checks(res *bench.Results) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(res.Params)) {
		if c, ok := strings.CutPrefix(k, "check "); ok {
			out = append(out, c+": "+res.Params[k])
		}
	}
	return out
}

// median returns the median of xs (the mean of the middle two when even).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// List is the suite in words, for moirai bench list.
func List() bench.Listing {
	l := bench.Listing{Suite: Suite}
	for _, c := range Cases() {
		l.Cases = append(l.Cases, bench.About{Suite: Suite, Name: c.Name, Models: "friendlypool",
			Resource: "CPU", Culprit: fmt.Sprintf("%d processes on the host", c.K)})
	}
	for _, c := range Controllers() {
		l.Controllers = append(l.Controllers, bench.Named{Name: c.Name, Describe: c.Describe})
	}
	return l
}

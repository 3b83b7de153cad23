// Package pathfencesuite is moirai's bench suite "pathfence": a shared
// upstream service U with a bounded worker pool, two downstreams D1 and
// D2 it calls on two paths, and requests of U's own (local), each in its
// own process, talking gRPC over loopback. Millibottlenecks, stalls of
// 200 to 500 ms, are injected into D1. The controllers differ in how U
// shares its workers: one pool (shared), one pool behind an adaptive
// per-service limit (static: Vegas from go-concurrency-limits, served by
// the benchmark module bench/peers), path fences with fixed reservations
// (pathfence, fixed-K) and path fences tuned online by the SCT model
// (pathfence-sct).
//
// Each (case, controller) gives one row per path — affected (calls D1),
// unaffected (calls D2), local — with the mean and p99 latency of its
// successful requests, its dropped requests (timeouts and rejections) and
// its throughput; and one run per path with the time series of its p99
// latency and throughput and the stalls injected, for the report's
// figure.
package pathfencesuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai/bench"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "pathfence"

// The paths of a row.
const (
	PathAffected   = "affected"
	PathUnaffected = "unaffected"
	PathLocal      = "local"
)

// Case is a workload: the request rates of each path, as multiples of a
// downstream's capacity, and whether D1 stalls.
type Case struct {
	Name, Describe string
	// Rates are requests per second on the affected, unaffected and local
	// paths, as multiples of one downstream's capacity.
	Affected, Unaffected, Local float64
	Stalls                      bool
}

var cases = []Case{
	{Name: "millibottleneck", Describe: "D1 stalls for 200–500 ms every 1.5–2.5 s; every path at half a downstream's capacity",
		Affected: 0.5, Unaffected: 0.5, Local: 0.5, Stalls: true},
	{Name: "peak", Describe: "no stalls; both downstream paths offered 1.5× a downstream's capacity: the throughput a controller keeps",
		Affected: 1.5, Unaffected: 1.5, Local: 0.5},
}

// Cases returns the suite's cases.
func Cases() []Case { return slices.Clone(cases) }

// Controller is a way U shares its workers.
type Controller struct {
	Name, Describe string
}

var controllers = []Controller{
	{"shared", "one pool of U's workers, one line in front of it"},
	{"static", "the pool behind a per-service adaptive concurrency limit (Vegas, go-concurrency-limits, at its defaults); tunable: static@ALPHA/BETA/SMOOTHING[/MAX], static@sweep"},
	{"pathfence", "path fences with fixed reservations, an even split"},
	{"pathfence-sct", "path fences tuned online by the SCT model (fence.Tuner)"},
}

// Controllers returns the suite's named controllers; fixed-K (path fences
// of K permits per path), limit-N (a static per-service limit of N, the
// static controller's fixed counterpart) and static@ALPHA/BETA/SMOOTHING
// (the static controller's Vegas at a setting, Vegas; static@sweep for
// SweepVegas) are accepted too, for sweeps.
func Controllers() []Controller { return slices.Clone(controllers) }

// SelectCases resolves a comma-separated list of case names, or "all".
func SelectCases(list string) ([]Case, error) {
	return bench.SelectByName(list, "case of suite pathfence", Cases(), func(c Case) string { return c.Name })
}

// SelectControllers resolves a comma-separated list of controller names,
// or "all" (the named ones); fixed-K, limit-N and static@… names are
// accepted as they come, static@sweep expands to SweepVegas.
func SelectControllers(list string) ([]Controller, error) {
	var out []Controller
	var named []string
	for _, n := range splitList(list) {
		if k, err := parseController(n); err == nil && k.name == "fixed" {
			out = append(out, Controller{n, fmt.Sprintf("path fences of %d permits per path", k.permits)})
			continue
		} else if err == nil && k.name == "limit" {
			out = append(out, Controller{n, fmt.Sprintf("the pool behind a static per-service concurrency limit of %d, the rest rejected at arrival", k.permits)})
			continue
		} else if err == nil && k.name == "static" && n != "static" {
			out = append(out, Controller{n, "the pool behind a per-service Vegas limit (go-concurrency-limits) at ALPHA/BETA/SMOOTHING " + k.vegas.String()})
			continue
		} else if n == "static@sweep" {
			for _, v := range SweepVegas {
				out = append(out, Controller{"static@" + v.String(), "the pool behind a per-service Vegas limit (go-concurrency-limits) at ALPHA/BETA/SMOOTHING " + v.String()})
			}
			continue
		} else if strings.HasPrefix(n, "static@") {
			return nil, err
		}
		named = append(named, n)
	}
	if len(named) > 0 || len(out) == 0 {
		sel, err := bench.SelectByName(joinList(named), "controller of suite pathfence", Controllers(), func(c Controller) string { return c.Name })
		if err != nil {
			return nil, err
		}
		out = append(sel, out...)
	}
	var uniq []Controller
	for _, c := range out {
		if !slices.ContainsFunc(uniq, func(u Controller) bool { return u.Name == c.Name }) {
			uniq = append(uniq, c)
		}
	}
	return uniq, nil
}

func splitList(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func joinList(names []string) string { return strings.Join(names, ",") }

// Options configure an invocation of the suite.
type Options struct {
	Cases       []Case
	Controllers []Controller
	// Warmup is the unmeasured start of each run (the classifier learns
	// the paths, the tuner its first reservations); Duration the measured
	// part after it.
	Warmup, Duration time.Duration
	Seed             uint64
	// The downstreams: Workers slots of Service each.
	Workers int
	Service time.Duration
	// U: Pool workers; Local per local request; Backlog waiting requests
	// in its line (under a fence, in each reservation's: a path gets as
	// much room to wait as the one line gives all); Permits per path for
	// the fenced controllers to start from.
	Pool    int
	Local   time.Duration
	Backlog int
	Permits int
	// Deadline is each request's deadline, from the load generator.
	Deadline time.Duration
	// Stalls: one every Period ± a quarter, of Min to Max each.
	Period, StallMin, StallMax time.Duration
	// Step is the width of the time series' buckets.
	Step time.Duration
	// Start starts one server and returns its address and a function
	// that stops it; the command line runs each in its own process (the
	// static controller's U from the benchmark module).
	Start func(ctx context.Context, cfg ServerConfig) (addr string, stop func() error, err error)
	// Progress, if set, is told what runs.
	Progress func(done, total int, what string)
}

// Defaults of the suite: each downstream serves 800 calls per second
// (8 workers of 10 ms); U has 32 workers; a local request takes 2 ms.
const (
	DefaultWorkers  = 8
	DefaultService  = 10 * time.Millisecond
	DefaultPool     = 32
	DefaultLocal    = 2 * time.Millisecond
	DefaultBacklog  = 150
	DefaultPermits  = 10
	DefaultDeadline = time.Second
	DefaultPeriod   = 2 * time.Second
	DefaultStallMin = 200 * time.Millisecond
	DefaultStallMax = 500 * time.Millisecond
	DefaultWarmup   = 6 * time.Second
	DefaultDuration = 20 * time.Second
	DefaultStep     = 250 * time.Millisecond
)

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	seti := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	seti(&o.Workers, DefaultWorkers)
	set(&o.Service, DefaultService)
	seti(&o.Pool, DefaultPool)
	set(&o.Local, DefaultLocal)
	seti(&o.Backlog, DefaultBacklog)
	seti(&o.Permits, DefaultPermits)
	set(&o.Deadline, DefaultDeadline)
	set(&o.Period, DefaultPeriod)
	set(&o.StallMin, DefaultStallMin)
	set(&o.StallMax, DefaultStallMax)
	set(&o.Step, DefaultStep)
}

// Capacity is one downstream's capacity in calls per second.
func (o *Options) Capacity() float64 { return float64(o.Workers) / o.Service.Seconds() }

// Execute runs every case under every controller and returns the results.
// A run that fails fails its rows; the others go on.
func Execute(ctx context.Context, o Options) (*bench.Results, error) {
	o.defaults()
	if o.Duration < time.Second || o.Warmup < 0 {
		return nil, fmt.Errorf("pathfencesuite: duration %v, warm-up %v: want a duration of at least 1s", o.Duration, o.Warmup)
	}
	if o.StallMax < o.StallMin {
		return nil, fmt.Errorf("pathfencesuite: stalls of %v to %v", o.StallMin, o.StallMax)
	}
	if o.Start == nil {
		return nil, errors.New("pathfencesuite: no way to start the servers (Options.Start)")
	}
	c := o.Capacity()
	res := &bench.Results{
		Suite: Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(),
		Params: map[string]string{
			"downstreams": fmt.Sprintf("D1 and D2: %d workers × %v per call, capacity %.0f calls/s each, each in its own process", o.Workers, o.Service, c),
			"upstream":    fmt.Sprintf("U: %d workers; a local request takes %v; a line of %d waiting requests (under a fence, each reservation's)", o.Pool, o.Local, o.Backlog),
			"fences":      fmt.Sprintf("pathfence: %d permits per path, local the rest; pathfence-sct starts there and tunes; fixed-K: K per path", o.Permits),
			"static":      "Vegas (go-concurrency-limits) in front of U's pool, starting at the pool's size and capped by it; queue thresholds alpha 3 and beta 6 (× log10 of the limit) and smoothing 1, the library's defaults, unless the name says static@ALPHA/BETA/SMOOTHING[/MAX]; samples over windows of 100 ms to 1 s",
			"stalls":      fmt.Sprintf("millibottleneck: D1 freezes for %v–%v every %v ± 25 %%, from the start of the run", o.StallMin, o.StallMax, o.Period),
			"load":        fmt.Sprintf("open loop, Poisson arrivals; deadline %v per request; a request that fails (deadline, rejection) is dropped", o.Deadline),
			"latency":     "mean and p99 of the requests that succeeded; throughput: successes per second",
			"warm-up":     o.Warmup.String() + " of each run, not measured",
		},
	}
	total, done := len(o.Cases)*len(o.Controllers), 0
	for _, cs := range o.Cases {
		for _, ctl := range o.Controllers {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if o.Progress != nil {
				o.Progress(done, total, cs.Name+": "+ctl.Name)
			}
			done++
			rows, runs, err := runOne(ctx, o, cs, ctl)
			if err != nil {
				rows = nil
				for _, p := range []string{PathAffected, PathUnaffected, PathLocal} {
					rows = append(rows, bench.Row{Suite: Suite, Case: cs.Name, Controller: ctl.Name, Path: p, Error: err.Error()})
				}
			}
			res.Rows = append(res.Rows, rows...)
			res.Runs = append(res.Runs, runs...)
		}
	}
	return res, nil
}

// result is one request's outcome.
type result struct {
	path    int           // 0 affected, 1 unaffected, 2 local
	at, end time.Duration // since the start of the run
	ok      bool
}

var pathNames = [3]string{PathAffected, PathUnaffected, PathLocal}
var pathMethods = [3]string{methodPath1, methodPath2, methodLocal}

// runOne starts D1, D2 and U for one controller, offers the case's load
// and measures the requests that arrived after the warm-up.
func runOne(ctx context.Context, o Options, cs Case, ctl Controller) ([]bench.Row, []bench.Run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dcfg := ServerConfig{Role: RoleD, Workers: o.Workers, Service: o.Service}
	d1, stop1, err := o.Start(ctx, dcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("starting D1: %w", err)
	}
	defer stop1()
	d2, stop2, err := o.Start(ctx, dcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("starting D2: %w", err)
	}
	defer stop2()
	ucfg := ServerConfig{Role: RoleU, Controller: ctl.Name, Pool: o.Pool, D1: d1, D2: d2, Local: o.Local, Backlog: o.Backlog, Permits: o.Permits}
	uaddr, stopU, err := o.Start(ctx, ucfg)
	if err != nil {
		return nil, nil, fmt.Errorf("starting U: %w", err)
	}
	defer stopU()
	dial := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	ucc, err := dial(uaddr)
	if err != nil {
		return nil, nil, err
	}
	defer ucc.Close()
	dcc, err := dial(d1)
	if err != nil {
		return nil, nil, err
	}
	defer dcc.Close()

	c := o.Capacity()
	rates := [3]float64{cs.Affected * c, cs.Unaffected * c, cs.Local * c}
	rng := rand.New(rand.NewPCG(o.Seed, uint64(len(cs.Name))))
	start := time.Now()
	end := o.Warmup + o.Duration
	var (
		mu      sync.Mutex
		results []result
		stalls  []bench.Event
		wg      sync.WaitGroup
	)
	// The stalls of D1, on their own schedule.
	if cs.Stalls {
		srng := rand.New(rand.NewPCG(o.Seed^0x5eed, 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := o.Period / 2
			for at < end {
				if !sleepUntil(ctx, start.Add(at)) {
					return
				}
				d := o.StallMin + time.Duration(srng.Float64()*float64(o.StallMax-o.StallMin))
				d = d.Round(time.Millisecond)
				sctx, scancel := context.WithTimeout(ctx, time.Second)
				err := dcc.Invoke(sctx, methodStall, wrapperspb.Int64(d.Milliseconds()), new(wrapperspb.Int64Value))
				scancel()
				if err == nil {
					mu.Lock()
					stalls = append(stalls, bench.Event{T: time.Since(start), Kind: "stall", Delay: d})
					mu.Unlock()
				}
				at += o.Period*3/4 + time.Duration(srng.Float64()*float64(o.Period/2))
			}
		}()
	}
	// One open-loop generator per path.
	for p := range 3 {
		if rates[p] <= 0 {
			continue
		}
		prng := rand.New(rand.NewPCG(rng.Uint64(), uint64(p)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Duration(0)
			for {
				next += time.Duration(prng.ExpFloat64() / rates[p] * float64(time.Second))
				if next >= end {
					return
				}
				if !sleepUntil(ctx, start.Add(next)) {
					return
				}
				at := next
				wg.Add(1)
				go func() {
					defer wg.Done()
					rctx, rcancel := context.WithTimeout(ctx, o.Deadline)
					err := ucc.Invoke(rctx, pathMethods[p], wrapperspb.Int64(0), new(wrapperspb.Int64Value))
					rcancel()
					r := result{path: p, at: at, end: time.Since(start), ok: err == nil}
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				}()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rows, runs := summarize(o, cs, ctl.Name, results, stalls)
	// The reservations at the end of the run (what the tuner settled on).
	var packed wrapperspb.Int64Value
	fctx, fcancel := context.WithTimeout(ctx, time.Second)
	err = ucc.Invoke(fctx, methodFence, wrapperspb.Int64(0), &packed)
	fcancel()
	if err == nil && packed.GetValue() > 0 {
		l, a, u := unpackPermits(packed.GetValue())
		rows[0].Permits, rows[1].Permits, rows[2].Permits = a, u, l
	}
	return rows, runs, nil
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// summarize computes the rows of the measured requests (those that
// arrived after the warm-up) and the runs' series, over the whole run.
func summarize(o Options, cs Case, ctl string, results []result, stalls []bench.Event) ([]bench.Row, []bench.Run) {
	var rows []bench.Row
	var runs []bench.Run
	sort.Slice(stalls, func(i, j int) bool { return stalls[i].T < stalls[j].T })
	total := o.Warmup + o.Duration
	for p := range 3 {
		var lat []float64
		dropped, sent := 0, 0
		nb := int((total + o.Step - 1) / o.Step)
		bucketLat := make([][]float64, nb)
		for _, r := range results {
			if r.path != p {
				continue
			}
			if r.ok {
				if b := int(r.end / o.Step); b >= 0 && b < nb {
					bucketLat[b] = append(bucketLat[b], ms(r.end-r.at))
				}
			}
			if r.at < o.Warmup {
				continue
			}
			sent++
			if r.ok {
				lat = append(lat, ms(r.end-r.at))
			} else {
				dropped++
			}
		}
		row := bench.Row{Suite: Suite, Case: cs.Name, Controller: ctl, Path: pathNames[p], Dropped: dropped, Sent: sent,
			Throughput: float64(len(lat)) / o.Duration.Seconds()}
		if len(lat) > 0 {
			slices.Sort(lat)
			sum := 0.0
			for _, x := range lat {
				sum += x
			}
			row.MeanMs = sum / float64(len(lat))
			row.P99Ms = quantile(lat, 0.99)
		}
		rows = append(rows, row)
		run := bench.Run{Case: cs.Name, Controller: ctl, Path: pathNames[p], WithCulprit: cs.Stalls, Duration: total,
			SeriesStep: o.Step, Events: slices.Clone(stalls)}
		for b, l := range bucketLat {
			pt := bench.Point{T: time.Duration(b) * o.Step, Throughput: float64(len(l)) / o.Step.Seconds()}
			if len(l) > 0 {
				slices.Sort(l)
				pt.P99Ms = quantile(l, 0.99)
			}
			run.Series = append(run.Series, pt)
		}
		runs = append(runs, run)
	}
	return rows, runs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile of sorted xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// List is the suite in words, for moirai bench list.
func List() bench.Listing {
	l := bench.Listing{Suite: Suite}
	for _, c := range cases {
		l.Cases = append(l.Cases, bench.About{Suite: Suite, Name: c.Name, Models: "PathFence",
			Resource: "U's workers", Culprit: c.Describe, Victims: "requests of the other paths"})
	}
	for _, c := range controllers {
		l.Controllers = append(l.Controllers, bench.Named(c))
	}
	return l
}

package dagorsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/internal/sleep"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "dagor"

// Case is a workload: how many calls to M each task makes. M¹…M⁴ make a
// fixed number; mixed draws it uniformly from 1 to 4 for each task.
type Case struct {
	Name  string
	Calls int // 0: mixed
}

// Cases returns M1, M2, M3, M4 and mixed.
func Cases() []Case {
	return []Case{{"M1", 1}, {"M2", 2}, {"M3", 3}, {"M4", 4}, {"mixed", 0}}
}

// measured is how long a run of the workload is measured. The mixed
// workload's figure is the spread of four success rates, each over a
// quarter of its tasks: over 4 s each would rest on about 400 successes
// at 4×, and sampling alone would spread them by 9 % on average (binomial,
// 4.6 % each); over three times the default duration, 24 s, by 4 %.
func (c Case) measured(o Options) time.Duration {
	if c.Calls == 0 {
		return 3 * o.Duration
	}
	return o.Duration
}

// meanCalls is the mean number of calls to M per task of the workload.
func (c Case) meanCalls() float64 {
	if c.Calls == 0 {
		return 2.5
	}
	return float64(c.Calls)
}

// Controller is an overload control configuration of A and M. Target and
// Interval are the setting of a tunable controller (codel, codel-rfc):
// zero takes the controller's default.
type Controller struct {
	Name, Describe   string
	Target, Interval time.Duration
	// K is sre's setting, sre@K (zero: the SRE book's 2).
	K float64
	// Window and Threshold are random's setting, random@WINDOW/THRESHOLD
	// (zero: the suite's detection, DAGOR's): the admission window and the
	// mean queueing time above which a window counts as overloaded.
	Window, Threshold time.Duration
}

// Base is the controller's name without its setting: "codel" for
// "codel@10ms/100ms".
func (c Controller) Base() string {
	b, _, _ := strings.Cut(c.Name, "@")
	return b
}

var controllers = []Controller{
	{Name: "none", Describe: "no admission control: M queues every call"},
	{Name: "random", Describe: "M sheds a random fraction, adjusted like DAGOR's level from the queueing time (baseline.Random); tunable: random@WINDOW/THRESHOLD, random@sweep"},
	{Name: "codel", Describe: "CoDel as RPC servers run it (baseline.RPCCoDel, \"Fail at Scale\"): once its queue has not emptied for an interval, M lets a call queue for the target only (for the interval otherwise), rejecting at the dequeue a call that queued longer and serving its queue LIFO meanwhile (baseline.LIFOQueue); target 5 ms, interval 100 ms"},
	{Name: "codel-rfc", Describe: "CoDel as RFC 8289 specifies it for packets (baseline.CoDel): drops at interval/√count once the queueing time stays above the target for an interval; target 5 ms, interval 100 ms"},
	{Name: "sre", Describe: "A throttles its calls client-side (baseline.SRE, K = 2) against M's rejections from a bounded line"},
	{Name: "dagor", Describe: "M admits by compound priority (admit.DAGOR); A sends priorities and sheds locally by M's level"},
	{Name: "dagor-local", Describe: "dagor without upstream cooperation: A sends priorities but never sheds locally"},
}

// tunable says whether a controller takes a setting, NAME@TARGET/INTERVAL.
func tunable(base string) bool { return base == "codel" || base == "codel-rfc" }

// SweepK is the grid sre@sweep expands to: the multiplier K of the SRE
// book's client-side throttling, its 2 left out (sre's own row).
var SweepK = []float64{1.1, 1.5, 3}

// TunedSRE returns sre with multiplier k, named sre@K.
func TunedSRE(k float64) (Controller, error) {
	c, _ := controllerByName("sre")
	if !(k >= 1) || k > 100 {
		return Controller{}, fmt.Errorf("controller sre@%g: want K in [1, 100]", k)
	}
	c.Name = "sre@" + strconv.FormatFloat(k, 'g', -1, 64)
	c.Describe += fmt.Sprintf("; here K = %g", k)
	c.K = k
	return c, nil
}

// SweepWindows and SweepThresholds are the grid random@sweep expands to:
// the window of random's detection and its queueing-time threshold,
// around the suite's 100 ms and 20 ms (DAGOR's, scaled to its rates).
var (
	SweepWindows    = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	SweepThresholds = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
)

// TunedRandom returns random with its detection at window and threshold,
// named random@WINDOW/THRESHOLD. The window's request count scales with
// the window, as the suite scales DAGOR's (Options.WindowCount requests
// per Options.Window).
func TunedRandom(window, threshold time.Duration) (Controller, error) {
	c, _ := controllerByName("random")
	if window < time.Millisecond || window > 10*time.Second || threshold <= 0 || threshold > 10*time.Second {
		return Controller{}, fmt.Errorf("controller random@%v/%v: want a window in [1ms, 10s] and a threshold in (0, 10s]", window, threshold)
	}
	c.Name = fmt.Sprintf("random@%v/%v", window, threshold)
	c.Describe, _, _ = strings.Cut(c.Describe, "; tunable:")
	c.Describe += fmt.Sprintf("; here a window of %v, a queueing-time threshold of %v", window, threshold)
	c.Window, c.Threshold = window, threshold
	return c, nil
}

// SweepTargets and SweepIntervals are the grid NAME@sweep expands to for a
// tunable controller.
var (
	SweepTargets   = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	SweepIntervals = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
)

// Controllers returns the suite's controllers, at their default settings.
func Controllers() []Controller { return slices.Clone(controllers) }

func controllerByName(n string) (Controller, bool) {
	i := slices.IndexFunc(controllers, func(c Controller) bool { return c.Name == n })
	if i < 0 {
		return Controller{}, false
	}
	return controllers[i], true
}

// Tuned returns the tunable controller base at the setting target and
// interval, named base@target/interval.
func Tuned(base string, target, interval time.Duration) (Controller, error) {
	c, ok := controllerByName(base)
	if !ok || !tunable(base) {
		return Controller{}, fmt.Errorf("%w: controller %q of suite dagor takes no setting (tunable: codel, codel-rfc, random, sre)", bench.ErrUnknown, base)
	}
	if target <= 0 || interval <= 0 || target > 10*time.Second || interval > 10*time.Second {
		return Controller{}, fmt.Errorf("controller %s: target %v and interval %v: want durations in (0, 10s]", base, target, interval)
	}
	c.Name = fmt.Sprintf("%s@%v/%v", base, target, interval)
	c.Describe += fmt.Sprintf("; here target %v, interval %v", target, interval)
	c.Target, c.Interval = target, interval
	return c, nil
}

// parseController resolves one controller name: NAME, NAME@TARGET/INTERVAL
// (codel, codel-rfc), random@WINDOW/THRESHOLD, sre@K, or NAME@sweep for a
// tunable controller.
func parseController(n string) ([]Controller, error) {
	base, setting, tuned := strings.Cut(n, "@")
	if !tuned {
		return bench.SelectByName(n, "controller of suite dagor", Controllers(), func(c Controller) string { return c.Name })
	}
	if base == "random" {
		return durationPair(n, setting, SweepWindows, SweepThresholds, TunedRandom,
			"want random@WINDOW/THRESHOLD (e.g. random@100ms/20ms) or random@sweep")
	}
	if base == "sre" {
		if setting == "sweep" {
			var out []Controller
			for _, k := range SweepK {
				c, err := TunedSRE(k)
				if err != nil {
					return nil, err
				}
				out = append(out, c)
			}
			return out, nil
		}
		k, err := strconv.ParseFloat(setting, 64)
		if err != nil {
			return nil, fmt.Errorf("controller %q: want sre@K (e.g. sre@1.5) or sre@sweep", n)
		}
		c, err := TunedSRE(k)
		if err != nil {
			return nil, err
		}
		return []Controller{c}, nil
	}
	return durationPair(n, setting, SweepTargets, SweepIntervals,
		func(t, i time.Duration) (Controller, error) { return Tuned(base, t, i) },
		"want NAME@TARGET/INTERVAL (e.g. codel@10ms/100ms) or NAME@sweep")
}

// durationPair resolves the setting of a controller tuned by two
// durations, A/B, or sweep for the grid as × bs; usage says what a bad
// setting should have been.
func durationPair(n, setting string, as, bs []time.Duration, tuned func(a, b time.Duration) (Controller, error), usage string) ([]Controller, error) {
	if setting == "sweep" {
		var out []Controller
		for _, a := range as {
			for _, b := range bs {
				c, err := tuned(a, b)
				if err != nil {
					return nil, err
				}
				out = append(out, c)
			}
		}
		return out, nil
	}
	as1, bs1, ok := strings.Cut(setting, "/")
	a, err1 := time.ParseDuration(as1)
	b, err2 := time.ParseDuration(bs1)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("controller %q: %s", n, usage)
	}
	c, err := tuned(a, b)
	if err != nil {
		return nil, err
	}
	return []Controller{c}, nil
}

// SelectCases resolves a comma-separated list of case names, or "all".
func SelectCases(list string) ([]Case, error) {
	return bench.SelectByName(list, "case of suite dagor", Cases(), func(c Case) string { return c.Name })
}

// SelectControllers resolves a comma-separated list of controller names,
// or "all". A tunable controller takes a setting, codel@10ms/100ms (target
// and interval), random@100ms/20ms (window and queueing-time threshold),
// sre@1.5 (K), or NAME@sweep for its grid (SweepTargets × SweepIntervals,
// SweepWindows × SweepThresholds, SweepK).
func SelectControllers(list string) ([]Controller, error) {
	if list == "" || list == "all" {
		return Controllers(), nil
	}
	var out []Controller
	for _, n := range strings.Split(list, ",") {
		cs, err := parseController(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if !slices.ContainsFunc(out, func(o Controller) bool { return o.Name == c.Name }) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// ParseFeeds parses a comma-separated list of feed ratios (f / f_sat).
func ParseFeeds(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0) || x > 16 {
			return nil, fmt.Errorf("feed ratio %q: want a number in (0, 16]", f)
		}
		out = append(out, x)
	}
	return out, nil
}

// Options configure an invocation of the suite.
type Options struct {
	Cases       []Case
	Controllers []Controller
	// Feeds are the feed rates, as ratios to the rate that saturates M.
	Feeds []float64
	// Warmup is the unmeasured start of each run (DAGOR's level needs it
	// to settle); Duration the measured part after it, three times as
	// long for the mixed workload. Before the runs, M's saturated rate
	// is measured: a quarter of Duration of warm-up (¼ s to 1 s), then
	// Duration of counting (1 s to 3 s).
	Warmup, Duration time.Duration
	Seed             uint64
	// M's capacity: Workers slots, Service per call; C = Workers/Service.
	Workers int
	Service time.Duration
	// Deadline is each task's deadline, from its arrival at A.
	Deadline time.Duration
	// Users is the number of distinct users the load comes from.
	Users int
	// Window and WindowCount are the admission window (DAGOR's 1 s or
	// 2,000 requests, scaled to the suite's rates); Threshold the
	// queueing-time threshold.
	Window      time.Duration
	WindowCount int
	Threshold   time.Duration
	// Start starts one server and returns its address and a function that
	// stops it; the command line runs each in its own process.
	Start func(ctx context.Context, cfg ServerConfig) (addr string, stop func() error, err error)
	// Progress, if set, is told what runs.
	Progress func(done, total int, what string)
}

// Defaults of the suite. M's capacity is 1,000 calls per second (20
// workers of 20 ms): at 4× overload the load generator, A and M together
// keep about one and a half of the machine's two cores busy. DAGOR's
// window, 1 s or 2,000 requests at WeChat's rates, is scaled to 100 ms or
// 200 requests here so that the level settles within the warm-up (at
// α = 5 %, shedding 75 % of the load takes at least 27 windows); a window
// then holds about 100 to 400 arrivals at M spread over 128 user levels,
// a sparser histogram than the paper's. A cell measured over 3 s moved
// by up to 0.06 between runs; over 8 s, by about 0.01.
const (
	DefaultWorkers     = 20
	DefaultService     = 20 * time.Millisecond
	DefaultDeadline    = 500 * time.Millisecond
	DefaultUsers       = 10000
	DefaultWindow      = 100 * time.Millisecond
	DefaultWindowCount = 200
	DefaultThreshold   = 20 * time.Millisecond
	DefaultWarmup      = 5 * time.Second
	DefaultDuration    = 8 * time.Second
)

// DefaultFeeds are the feed ratios of a default invocation.
var DefaultFeeds = []float64{0.5, 1, 2, 4}

func (o *Options) defaults() {
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Service == 0 {
		o.Service = DefaultService
	}
	if o.Deadline == 0 {
		o.Deadline = DefaultDeadline
	}
	if o.Users == 0 {
		o.Users = DefaultUsers
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.WindowCount == 0 {
		o.WindowCount = DefaultWindowCount
	}
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if len(o.Feeds) == 0 {
		o.Feeds = DefaultFeeds
	}
}

// Capacity is M's capacity in calls per second.
func (o *Options) Capacity() float64 { return float64(o.Workers) / o.Service.Seconds() }

// Execute runs every case under every controller at every feed rate and
// returns the results. A run that fails fails its row; the others go on.
func Execute(ctx context.Context, o Options) (*bench.Results, error) {
	o.defaults()
	if o.Duration < 100*time.Millisecond || o.Warmup < 0 {
		return nil, fmt.Errorf("dagorsuite: duration %v, warm-up %v: want a duration of at least 100ms", o.Duration, o.Warmup)
	}
	if o.Start == nil {
		return nil, errors.New("dagorsuite: no way to start the servers (Options.Start)")
	}
	c := o.Capacity()
	if o.Progress != nil {
		o.Progress(0, 1, "measuring M's saturated rate")
	}
	sat, err := saturatedRate(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("dagorsuite: measuring M's saturated rate: %w", err)
	}
	sat = min(sat, c) // M cannot beat its capacity; a count at the edges can

	res := &bench.Results{
		Suite: Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(),
		Params: map[string]string{
			"M":            fmt.Sprintf("%d workers × %v per call: capacity C = %.0f calls/s; A and M in their own processes, gRPC on loopback", o.Workers, o.Service, c),
			"feed":         "f / f_sat, with f_sat = C / (calls per task); Poisson arrivals",
			"optimum":      fmt.Sprintf("min(1, what M completes at its measured saturated rate S over the measured part / the calls the tasks that arrived in it ask for); S = %.0f calls/s (%.3f C), measured before the runs with one-call tasks arriving at 1.25 C and M's line bounded at four times its workers", sat, sat/c),
			"deadline":     o.Deadline.String() + " per task, from its arrival at A",
			"users":        fmt.Sprintf("%d, uniformly; business priority one for all tasks", o.Users),
			"admission":    fmt.Sprintf("DAGOR and random: window %v or %d requests, queueing-time threshold %v, unless the name says random@WINDOW/THRESHOLD (the request count scaled with the window); codel and codel-rfc: target 5 ms, interval 100 ms unless the name says NAME@TARGET/INTERVAL", o.Window, o.WindowCount, o.Threshold),
			"warm-up":      o.Warmup.String() + " of each run, not measured",
			"measured":     fmt.Sprintf("%v after the warm-up, %v for the mixed workload (its spread rests on a quarter of the tasks each)", o.Duration, 3*o.Duration),
			"wasted work":  "M's completed calls that belonged to failed tasks, over all its completed calls",
			"sre baseline": "M's line bounded at 4 × workers; A throttles with K = 2 over a 2 s history",
		},
	}
	total, done := len(o.Cases)*len(o.Controllers)*len(o.Feeds), 0
	for _, cs := range o.Cases {
		for _, feed := range o.Feeds {
			for _, ctl := range o.Controllers {
				if err := ctx.Err(); err != nil {
					return res, err
				}
				if o.Progress != nil {
					o.Progress(done, total, fmt.Sprintf("%s ×%g: %s", cs.Name, feed, ctl.Name))
				}
				done++
				row, err := runOne(ctx, o, cs, ctl, feed, sat)
				if err != nil {
					row = bench.Row{Suite: Suite, Case: cs.Name, Controller: ctl.Name, FeedRatio: feed, Error: err.Error()}
				}
				res.Rows = append(res.Rows, row)
			}
		}
	}
	return res, nil
}

// outcome is what happened to one task.
type outcome struct {
	calls     int
	completed int64
	ok        bool
}

// startPair starts M and A under one controller and connects to A; stop
// undoes all of it.
func startPair(ctx context.Context, o Options, ctl Controller) (cc *grpc.ClientConn, stop func(), err error) {
	base := ServerConfig{Controller: ctl.Base(), CoDelTarget: ctl.Target, CoDelInterval: ctl.Interval, SREK: ctl.K, Workers: o.Workers, Service: o.Service, Backlog: 4 * o.Workers,
		Window: o.Window, WindowCount: o.WindowCount, Threshold: o.Threshold, SREWindow: 2 * time.Second,
		Key: o.Seed ^ 0x9e3779b97f4a7c15, Deadline: o.Deadline}
	if ctl.Window > 0 {
		base.Window = ctl.Window
		base.WindowCount = max(1, int(math.Round(float64(o.WindowCount)*float64(ctl.Window)/float64(o.Window))))
	}
	if ctl.Threshold > 0 {
		base.Threshold = ctl.Threshold
	}
	var stops []func() error
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	mcfg := base
	mcfg.Role = RoleM
	maddr, stopM, err := o.Start(ctx, mcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("starting M: %w", err)
	}
	stops = append(stops, stopM)
	acfg := base
	acfg.Role, acfg.Downstream = RoleA, maddr
	aaddr, stopA, err := o.Start(ctx, acfg)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting A: %w", err)
	}
	stops = append(stops, stopA)
	cc, err = grpc.NewClient(aaddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		return nil, nil, err
	}
	stops = append(stops, cc.Close)
	// The client connects on its first call: make that call now, so that
	// connecting (slow on a loaded machine or under the race detector)
	// does not eat into the warm-up or the measured part.
	if err := ready(ctx, cc, o.Deadline); err != nil {
		stop()
		return nil, nil, err
	}
	return cc, stop, nil
}

// ready calls A until a one-call task succeeds, for up to 10 s.
func ready(ctx context.Context, cc *grpc.ClientConn, deadline time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !runTask(ctx, cc, deadline, "ready", 1).ok {
		if err := sleep.For(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("dagorsuite: A and M did not answer a call within 10s: %w", err)
		}
	}
	return nil
}

// saturatedRate measures the rate at which M completes calls when it is
// never short of work: one-call tasks arrive at A at 1.25 C (Poisson),
// M queues up to four times its workers and refuses the rest, A does not
// throttle (sre's bounded line; at this overload its client-side
// throttle, K = 2, stays open), and the rate is the calls completed over
// three seconds after a second of warm-up (at the suite's durations; see
// Options.Duration for shorter runs). It is below the nominal
// capacity C by what a call costs beyond its service time (the timer's
// lateness, the hand-over of the worker slot); it is what the optimum is
// computed from. Arrivals are random as in the runs: driven in lockstep
// by a closed loop, M's workers finish and hand over together, and the
// rate is lower.
func saturatedRate(ctx context.Context, o Options) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc, stop, err := startPair(ctx, o, Controller{Name: "sre"})
	if err != nil {
		return 0, err
	}
	defer stop()
	// At least a second counted, whatever the runs' duration: a shorter
	// window on a loaded machine can close before the first calls
	// (their connections made) come back.
	warm, measure := min(time.Second, max(o.Duration/4, 250*time.Millisecond)), min(3*time.Second, max(o.Duration, time.Second))
	start := time.Now()
	var done, sent, ok atomic.Int64
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	err = arrivals(ctx, rng, warm+measure, func(time.Duration) float64 { return 1.25 * o.Capacity() }, func(time.Duration) func() {
		return func() {
			sent.Add(1)
			out := runTask(ctx, cc, o.Deadline, "calibration", 1)
			if out.ok {
				ok.Add(1)
			}
			if at := time.Since(start); out.ok && at >= warm && at < warm+measure {
				done.Add(1)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if done.Load() == 0 {
		return 0, fmt.Errorf("no call completed in the %v measured (%d tasks sent, %d succeeded)", measure, sent.Load(), ok.Load())
	}
	return float64(done.Load()) / measure.Seconds(), nil
}

// runOne starts M and A for one controller, offers the workload at the
// feed rate and measures the tasks that arrived after the warm-up.
func runOne(ctx context.Context, o Options, cs Case, ctl Controller, feed, sat float64) (bench.Row, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc, stop, err := startPair(ctx, o, ctl)
	if err != nil {
		return bench.Row{}, err
	}
	defer stop()

	fsat := o.Capacity() / cs.meanCalls()
	rate := feed * fsat
	ramp := o.Warmup / 2
	rng := rand.New(rand.NewPCG(o.Seed, uint64(feed*1000)+uint64(cs.Calls)))
	var (
		mu       sync.Mutex
		measured []outcome
	)
	// The load goes on for a deadline after the measured part, so that
	// the tasks measured last compete with later ones as the earlier ones
	// did, instead of finding M idle.
	dur := cs.measured(o)
	err = arrivals(ctx, rng, o.Warmup+dur+o.Deadline, func(at time.Duration) float64 {
		// The load rises from half M's capacity to the feed rate over the
		// first half of the warm-up, as traffic rises in a service, rather
		// than hitting M at full overload from the first millisecond: the
		// step would build a backlog whose draining takes every controller
		// far below the steady state the run means to measure.
		if at < ramp && rate > fsat/2 {
			return fsat/2 + (rate-fsat/2)*float64(at)/float64(ramp)
		}
		return rate
	}, func(at time.Duration) func() {
		calls := cs.Calls
		if calls == 0 {
			calls = 1 + rng.IntN(4)
		}
		user := strconv.Itoa(rng.IntN(o.Users))
		inWindow := at >= o.Warmup && at < o.Warmup+dur
		return func() {
			out := runTask(ctx, cc, o.Deadline, user, calls)
			if inWindow {
				mu.Lock()
				measured = append(measured, out)
				mu.Unlock()
			}
		}
	})
	if err != nil {
		return bench.Row{}, err
	}
	return summarize(Suite, cs.Name, ctl.Name, feed, sat*dur.Seconds(), measured), nil
}

// arrivals paces a Poisson process of the given rate (per second, as a
// function of the time since the start) for span, and runs what task
// returns for each arrival in a goroutine of its own; task itself runs in
// the caller's goroutine, so it may draw from rng. It returns when every
// goroutine has, with ctx's error if ctx ended first.
func arrivals(ctx context.Context, rng *rand.Rand, span time.Duration, rate func(at time.Duration) float64, task func(at time.Duration) func()) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate(at) * float64(time.Second))
		if at >= span {
			return nil
		}
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		wg.Go(task(at))
	}
}

// runTask sends one task to A. The task's deadline is A's to enforce;
// the generator waits a second longer, so it hears about the work done
// even for a task that ran out of time.
func runTask(ctx context.Context, cc *grpc.ClientConn, deadline time.Duration, user string, calls int) outcome {
	ctx, cancel := context.WithTimeout(ctx, deadline+time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, keyUser, user)
	var reply wrapperspb.Int64Value
	out := outcome{calls: calls}
	if err := cc.Invoke(ctx, methodTask, wrapperspb.Int64(int64(calls)), &reply); err != nil {
		return out
	}
	out.completed, out.ok = decodeResult(reply.GetValue())
	return out
}

// summarize computes a row from the measured tasks. capacity is the
// number of calls M can complete over the measured part; the optimum is
// the share of the calls the tasks ask for that it covers (the best any
// controller can do is to spend all of it on whole tasks).
func summarize(suite, cs, ctl string, feed, capacity float64, tasks []outcome) bench.Row {
	row := bench.Row{Suite: suite, Case: cs, Controller: ctl, FeedRatio: feed, OptimalSuccessRate: 1}
	var ok, work, wasted, asked int64
	var byN, okN [5]int
	for _, t := range tasks {
		asked += int64(t.calls)
		work += t.completed
		if t.ok {
			ok++
		} else {
			wasted += t.completed
		}
		if t.calls >= 1 && t.calls <= 4 {
			byN[t.calls]++
			if t.ok {
				okN[t.calls]++
			}
		}
	}
	if len(tasks) > 0 {
		row.SuccessRate = float64(ok) / float64(len(tasks))
	}
	if asked > 0 {
		row.OptimalSuccessRate = math.Min(1, capacity/float64(asked))
	}
	if work > 0 {
		row.WastedWork = float64(wasted) / float64(work)
	}
	if cs == "mixed" {
		row.SuccessByCalls = make([]float64, 4)
		for n := 1; n <= 4; n++ {
			if byN[n] > 0 {
				row.SuccessByCalls[n-1] = float64(okN[n]) / float64(byN[n])
			}
		}
	}
	return row
}

// List is the suite in words, for moirai bench list.
func List() bench.Listing {
	l := bench.Listing{Suite: Suite}
	for _, c := range Cases() {
		culprit := fmt.Sprintf("tasks calling M %d times, fed above its capacity", c.Calls)
		if c.Calls == 0 {
			culprit = "tasks calling M 1 to 4 times, fed above its capacity"
		}
		l.Cases = append(l.Cases, bench.About{Suite: Suite, Name: c.Name, Models: "DAGOR", Resource: "M's workers", Culprit: culprit})
	}
	for _, c := range controllers {
		l.Controllers = append(l.Controllers, bench.Named{Name: c.Name, Describe: c.Describe})
	}
	return l
}

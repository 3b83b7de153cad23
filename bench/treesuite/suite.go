// Package treesuite is the lab's suite of cancellation across services
// (moirai bench run --suite tree): three services over loopback gRPC, each
// its own process, a frontend and two backends. Light trees call b1, whose
// table lock they take briefly; a culprit tree calls b1 and b2 at once,
// holds b1's lock and a b2 worker for long, and holds its frontend worker
// until both answer. Controllers: none (tracing only), local (moirai's
// cancellation in each service, acting alone; the frontend retries a
// call that failed with Unavailable, as an ordinary retry policy does),
// and tree (the same, with the request tree carried and a culprit
// cancelled upward: see package github.com/moirai-go/moirai/tree).
//
// Each row reports the light trees' p99 and throughput normalized by a
// run without the culprit, the resource-time the culprit trees held after
// the first decision on them summed over the three services (mean per
// culprit tree), the retries of culprit calls sent into b1, and the light
// calls or trees cancelled (victims). With Options.Rounds above one, the
// runs are repeated, interleaved, each round with its own seed, and a row
// pools its rounds.
package treesuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai/bench"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "tree"

// Controller is one configuration of the three services.
type Controller struct{ Name, Describe string }

var controllers = []Controller{
	{"none", "no control: every service traces only"},
	{"local", "moirai's cancellation in each service, acting alone; the frontend retries a call that failed with Unavailable (2 retries, 20 ms apart)"},
	{"tree", "local, with the request tree carried (grpcmw.WithTree, WithTreeCancel): a culprit answer cancels the frontend's task, hence its other call, and is not retried"},
}

var controllerNames = []string{"none", "local", "tree"}

// Controllers returns none, local and tree.
func Controllers() []Controller { return slices.Clone(controllers) }

// SelectControllers resolves a comma-separated list of names, or "all".
func SelectControllers(list string) ([]Controller, error) {
	return bench.SelectByName(list, "controller", Controllers(), func(c Controller) string { return c.Name })
}

// Defaults of the suite.
const (
	DefaultDuration    = 6 * time.Second
	DefaultWarmup      = time.Second
	DefaultRate        = 100 // light trees per second
	DefaultSLO         = 50 * time.Millisecond
	DefaultLightWork   = 2 * time.Millisecond
	DefaultCulpritWork = 3 * time.Second
	DefaultPeriod      = 2 * time.Second
)

// Options configures a run of the suite.
type Options struct {
	Controllers []Controller
	// Warmup is the unmeasured start of each run; Duration the measured
	// part after it, in which a culprit tree arrives every Period,
	// starting at the start of the measured part.
	Warmup, Duration, Period time.Duration
	// Rounds is how many times the run without the culprit and each
	// controller's run go, interleaved; round k's light arrivals are drawn
	// from Seed+k. A row pools its rounds as one long run (the light
	// trees' latencies, the culprit trees and the counts summed), and the
	// results' params give each round's p99_norm.
	Rounds                 int
	Seed                   uint64
	Rate                   float64 // light trees per second, Poisson arrivals
	SLO                    time.Duration
	LightWork, CulpritWork time.Duration
	// Start starts one process and returns its address and a function
	// that stops it.
	Start    func(ctx context.Context, cfg ServerConfig) (addr string, stop func() error, err error)
	Progress func(done, total int, what string)
}

func (o *Options) defaults() {
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.SLO <= 0 {
		o.SLO = DefaultSLO
	}
	if o.LightWork <= 0 {
		o.LightWork = DefaultLightWork
	}
	if o.CulpritWork <= 0 {
		o.CulpritWork = DefaultCulpritWork
	}
	if len(o.Controllers) == 0 {
		o.Controllers = Controllers()
	}
	o.Rounds = max(o.Rounds, 1)
}

// Execute runs the suite: a run without the culprit (controller none),
// then one run per controller with it.
func Execute(ctx context.Context, o Options) (*bench.Results, error) {
	o.defaults()
	if o.Duration < 500*time.Millisecond || o.Warmup < 0 {
		return nil, fmt.Errorf("treesuite: duration %v, warm-up %v: want a duration of at least 500ms", o.Duration, o.Warmup)
	}
	if o.Start == nil {
		return nil, errors.New("treesuite: no way to start the processes (Options.Start)")
	}
	res := &bench.Results{
		Suite: Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(),
		Params: map[string]string{
			"services":      "front, b1, b2: each its own process, gRPC on loopback",
			"light trees":   fmt.Sprintf("%.0f/s, Poisson: front → b1, holding b1's table lock %v; objective %v", o.Rate, o.LightWork, o.SLO),
			"culprit trees": fmt.Sprintf("one every %v of the measured part: front → b1 (the table lock) and b2 (a worker of 4) at once, %v of work in each unless cancelled", o.Period, o.CulpritWork),
			"hold after":    "per culprit tree, the time its calls held front's worker, b1's lock and b2's worker after the first cancellation of any of them, summed; mean over culprit trees",
			"retries":       "culprit calls front sent to b1 again after an Unavailable answer",
			"victims":       "light calls or trees cancelled by any controller",
			"warm-up":       o.Warmup.String(),
		},
	}
	if o.Rounds > 1 {
		res.Params["rounds"] = fmt.Sprintf("%d, interleaved (the run without the culprit, then each controller); round k's light arrivals from seed %d+k; a row pools its rounds' light trees, culprit trees and counts", o.Rounds, o.Seed)
	}
	total, done := o.Rounds*(len(o.Controllers)+1), 0
	progress := func(what string, round int) {
		if o.Progress != nil {
			if o.Rounds > 1 {
				what = fmt.Sprintf("round %d/%d: %s", round+1, o.Rounds, what)
			}
			o.Progress(done, total, what)
		}
		done++
	}
	var base measured
	pooled := make([]measured, len(o.Controllers))
	failed := make([]string, len(o.Controllers))
	perRound := make([][]string, len(o.Controllers))
	for round := range o.Rounds {
		ro := o
		ro.Seed = o.Seed + uint64(round)
		progress("without the culprit", round)
		b, err := runOne(ctx, ro, Controller{Name: "none"}, false)
		if err != nil {
			return nil, fmt.Errorf("treesuite: the run without the culprit: %w", err)
		}
		base.pool(b)
		for i, c := range o.Controllers {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			progress(c.Name, round)
			if failed[i] != "" {
				continue
			}
			m, err := runOne(ctx, ro, c, true)
			if err != nil {
				failed[i] = err.Error()
				continue
			}
			pooled[i].pool(m)
			perRound[i] = append(perRound[i], strconv.FormatFloat(m.row(c.Name, b).P99Norm, 'f', 2, 64))
		}
	}
	row := base.row("none", base)
	row.NoCulprit = true
	res.Rows = append(res.Rows, row)
	for i, c := range o.Controllers {
		if failed[i] != "" {
			res.Rows = append(res.Rows, bench.Row{Suite: Suite, Case: "fanout", Controller: c.Name, Error: failed[i]})
			continue
		}
		res.Rows = append(res.Rows, pooled[i].row(c.Name, base))
		if o.Rounds > 1 {
			res.Params["p99_norm by round: "+c.Name] = strings.Join(perRound[i], ", ")
		}
	}
	return res, nil
}

// measured is what one run measured.
type measured struct {
	light      []time.Duration // latencies of light trees that succeeded in the measured part
	failed     int
	seconds    float64
	holdAfter  float64 // ms, mean per culprit tree
	culprits   int
	retries    int64
	victims    int64
	decided    int
	cancelledC int64
	inSLO      int              // light trees answered within the objective
	arrived    map[string]int64 // culprit tree → Unix ns of its arrival
	decidedMs  float64          // mean time from a culprit tree's arrival to its first decision
	// afterMs and decidedSumMs are the sums behind holdAfter and
	// decidedMs, over the culprit trees and the timed ones, for pool.
	afterMs, decidedSumMs float64
	timed                 int // decided culprit trees whose arrival is known
}

// pool adds the run n to m, as if the two were one run of both measured
// parts.
func (m *measured) pool(n measured) {
	m.light = append(m.light, n.light...)
	m.failed += n.failed
	m.seconds += n.seconds
	m.culprits += n.culprits
	m.retries += n.retries
	m.victims += n.victims
	m.decided += n.decided
	m.cancelledC += n.cancelledC
	m.inSLO += n.inSLO
	m.afterMs += n.afterMs
	m.decidedSumMs += n.decidedSumMs
	m.timed += n.timed
	m.holdAfter, m.decidedMs = 0, 0
	if m.culprits > 0 {
		m.holdAfter = m.afterMs / float64(m.culprits)
	}
	if m.timed > 0 {
		m.decidedMs = m.decidedSumMs / float64(m.timed)
	}
}

func (m measured) p99() time.Duration {
	if len(m.light) == 0 {
		return 0
	}
	s := slices.Clone(m.light)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
}

func (m measured) row(ctl string, base measured) bench.Row {
	r := bench.Row{Suite: Suite, Case: "fanout", Controller: ctl,
		CulpritHoldAfterMs: m.holdAfter, RetriesIntoOverload: int(m.retries),
		VictimsCancelled: int(m.victims), CulpritsCancelled: int(m.cancelledC),
		P99Ms: float64(m.p99()) / float64(time.Millisecond), DecidedAfterMs: m.decidedMs}
	if n := len(m.light) + m.failed; n > 0 {
		r.SLOAttainment = float64(m.inSLO) / float64(n)
	}
	if bp := base.p99(); bp > 0 {
		r.P99Norm = float64(m.p99()) / float64(bp)
	}
	if bt := float64(len(base.light)) / base.seconds; bt > 0 {
		r.ThroughputNorm = float64(len(m.light)) / m.seconds / bt
	}
	return r
}

// runOne starts the three processes under c and runs the load.
func runOne(ctx context.Context, o Options, c Controller, culprit bool) (measured, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := ServerConfig{Controller: c.Name, SLO: o.SLO, LightWork: o.LightWork, CulpritWork: o.CulpritWork, Retries: 2, RetryBackoff: 20 * time.Millisecond}
	var stops []func() error
	defer func() {
		for _, s := range slices.Backward(stops) {
			_ = s()
		}
	}()
	start := func(role string) (string, error) {
		cf := cfg
		cf.Role = role
		addr, stop, err := o.Start(ctx, cf)
		if err != nil {
			return "", fmt.Errorf("starting %s: %w", role, err)
		}
		stops = append(stops, stop)
		return addr, nil
	}
	var err error
	if cfg.B1, err = start(RoleB1); err != nil {
		return measured{}, err
	}
	if cfg.B2, err = start(RoleB2); err != nil {
		return measured{}, err
	}
	frontAddr, err := start(RoleFront)
	if err != nil {
		return measured{}, err
	}
	conns := map[string]*grpc.ClientConn{}
	for role, addr := range map[string]string{RoleFront: frontAddr, RoleB1: cfg.B1, RoleB2: cfg.B2} {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return measured{}, err
		}
		defer cc.Close()
		conns[role] = cc
	}
	m, err := load(ctx, o, conns[RoleFront], culprit)
	if err != nil {
		return m, err
	}
	var all []Stats
	for _, role := range []string{RoleFront, RoleB1, RoleB2} {
		out := new(wrapperspb.StringValue)
		if err := conns[role].Invoke(ctx, methodStats, wrapperspb.String(""), out); err != nil {
			return m, fmt.Errorf("stats of %s: %w", role, err)
		}
		var st Stats
		if err := json.Unmarshal([]byte(out.GetValue()), &st); err != nil {
			return m, fmt.Errorf("stats of %s: %w", role, err)
		}
		all = append(all, st)
	}
	m.account(all)
	return m, nil
}

// account sums the culprit trees' holds after their first decision.
func (m *measured) account(all []Stats) {
	decided := map[string]int64{}
	for _, st := range all {
		for k, at := range st.Decided {
			if d, ok := decided[k]; !ok || at < d {
				decided[k] = at
			}
		}
		m.retries += st.Retries
		m.victims += st.Victims
		m.cancelledC += st.Culprits
	}
	var after time.Duration
	for _, st := range all {
		for _, h := range st.Holds {
			d, ok := decided[h.Tree]
			if !ok {
				continue
			}
			if h.End > max(h.Start, d) {
				after += time.Duration(h.End - max(h.Start, d))
			}
		}
	}
	m.decided = len(decided)
	var sum time.Duration
	for k, d := range decided {
		if a, ok := m.arrived[k]; ok {
			sum += time.Duration(d - a)
			m.timed++
		}
	}
	m.decidedSumMs = float64(sum) / float64(time.Millisecond)
	m.afterMs = float64(after) / float64(time.Millisecond)
	if m.timed > 0 {
		m.decidedMs = m.decidedSumMs / float64(m.timed)
	}
	if m.culprits > 0 {
		m.holdAfter = m.afterMs / float64(m.culprits)
	}
}

// load sends light trees at o.Rate for the warm-up and the measured part,
// and a culprit tree every o.Period of the measured part; it waits for
// every tree to answer.
func load(ctx context.Context, o Options, front *grpc.ClientConn, culprit bool) (measured, error) {
	r := rand.New(rand.NewPCG(o.Seed, 32))
	var (
		mu  sync.Mutex
		m   = measured{arrived: map[string]int64{}}
		wg  sync.WaitGroup
		t0  = time.Now()
		end = t0.Add(o.Warmup + o.Duration)
		mt0 = t0.Add(o.Warmup)
	)
	call := func(req string, at time.Time, measure bool) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, o.CulpritWork+5*time.Second)
		defer cancel()
		err := front.Invoke(cctx, methodOf(req), wrapperspb.String(req), new(wrapperspb.BoolValue))
		lat := time.Since(at)
		if !measure {
			return
		}
		mu.Lock()
		if err != nil {
			m.failed++
		} else {
			m.light = append(m.light, lat)
			if lat <= o.SLO {
				m.inSLO++
			}
		}
		mu.Unlock()
	}
	next := t0
	nextCulprit := mt0
	n, k := 0, 0
	for {
		now := time.Now()
		if culprit && !nextCulprit.After(now) && nextCulprit.Before(end) {
			k++
			wg.Add(1)
			mu.Lock()
			m.arrived[strconv.Itoa(k)] = time.Now().UnixNano()
			mu.Unlock()
			go call("culprit:"+strconv.Itoa(k), nextCulprit, false)
			nextCulprit = nextCulprit.Add(o.Period)
			continue
		}
		if !next.Before(end) {
			break
		}
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return m, ctx.Err()
			case <-time.After(min(wait, time.Until(nextCulprit).Abs()+time.Millisecond)):
			}
			continue
		}
		n++
		wg.Add(1)
		go call("light:"+strconv.Itoa(n), next, !next.Before(mt0))
		next = next.Add(time.Duration(r.ExpFloat64() / o.Rate * float64(time.Second)))
	}
	wg.Wait()
	m.seconds = o.Duration.Seconds()
	m.culprits = k
	return m, nil
}

// List is the suite in words, for moirai bench list.
func List() bench.Listing {
	l := bench.Listing{Suite: Suite, Cases: []bench.About{{Suite: Suite, Name: "fanout", Models: "request trees",
		Resource: "b1's table lock, b2's workers, front's workers", Culprit: "a tree fanning out to b1 and b2, holding both for long", Victims: "light trees calling b1"}}}
	for _, c := range controllers {
		l.Controllers = append(l.Controllers, bench.Named(c))
	}
	return l
}

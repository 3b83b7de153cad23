package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/sleep"
	"github.com/moirai-go/moirai/metrics"
	"github.com/moirai-go/moirai/policy"
)

// MinDuration is the shortest run that measures anything: the culprit
// must have time to hurt, and the controller time to act.
const MinDuration = time.Second

// Options configure an invocation of the harness.
type Options struct {
	Suite       string
	Cases       []Case
	Controllers []Controller
	// Duration is the length of each run.
	Duration time.Duration
	Seed     uint64
	// NoCulprit measures what each controller costs when nothing goes
	// wrong: every case runs without its culprit, once under no control
	// (the baseline) and once under each controller, and the rows compare
	// each run with the baseline (p99_norm is then the raw ratio of the
	// p99s, not floored at a tenth of the objective). A "none" controller
	// in the list measures the noise between two identical runs.
	NoCulprit bool
	// Progress, if set, is told what runs, as a fraction of all runs.
	Progress func(done, total int, what string)
	// Load multiplies each case's light request rate (0 means 1): the
	// soak runs the cases at twice their rate.
	Load float64
	// Metrics registers each run's controller with Prometheus collectors
	// (metrics.NewCollector and metrics.Decisions as its decision
	// observer, on a registry of the run's own) and scrapes it every
	// MetricsEvery (default 100 ms, a hundred times a production scrape
	// rate) while the run lasts: what exporting metrics costs.
	Metrics      bool
	MetricsEvery time.Duration
	// Stream sends, in place of each case's one culprit request, its noisy
	// client (Service.Noisy): a stream of shorter requests of the
	// culprit's class from CulpritAt for half the run, as pBox's noisy
	// connections; a client whose request was not served waits 10 ms
	// before its next. Cases without a noisy client send their culprit.
	Stream bool
	// NoisyClients, if positive, replaces every case's Service.NoisyClients
	// in a Stream run.
	NoisyClients int
	// SLOScale, if positive, multiplies the objective each controller is
	// told (its detector's, its admission's); the metrics (SLO attainment,
	// the floor of p99_norm's base) keep the case's own.
	SLOScale float64
	// HostLoad, if positive, makes the host hostile: that many processes
	// from HostLoadCommand (at most MaxHostLoad), each busy-looping on a
	// CPU, are started before each run and killed after it. They are
	// other processes, outside the controller's view, as the compilers
	// and tests of other jobs on a shared machine are: the service's
	// requests are stretched by the scheduler, not by a culprit of their
	// own. HostLoadCommand returns the command of one such process; it
	// must run until its standard input is closed.
	HostLoad        int
	HostLoadCommand func(ctx context.Context) *exec.Cmd

	// watch, if set, is told of each run's controller when the run
	// starts, and the function it returns when the run is over: with the
	// error of the controller's Close (tasks never ended) and the worker
	// slots still held after every handler returned. The soak samples the
	// live controllers' registries through it.
	watch func(*moirai.Controller) func(closeErr error, leakedSlots int64)
}

// Outcome header values.
const (
	outcomeHeader = "Moirai-Outcome"
	outcomeOK     = "ok"
	outcomeCancel = "cancelled"
	outcomeReject = "rejected"
	outcomeFail   = "failed"
)

var errRejected = errors.New("bench: rejected by admission")

// Execute runs every case under every controller and returns the results.
// Runs follow one another; a run that fails (a controller that panics, a
// service that cannot start) fails its row and the others go on. ctx
// cancels the invocation.
func Execute(ctx context.Context, o Options) (*Results, error) {
	if o.Duration < MinDuration {
		return nil, fmt.Errorf("bench: duration %v is too short to measure; the minimum is %v", o.Duration, MinDuration)
	}
	if err := o.checkHostLoad(); err != nil {
		return nil, err
	}
	res := &Results{
		Suite: o.Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: CurrentMachine(),
	}
	if o.Metrics {
		every := o.MetricsEvery
		if every <= 0 {
			every = 100 * time.Millisecond
		}
		res.Params = map[string]string{"metrics": "collector and decisions, scraped every " + every.String()}
	}
	if o.SLOScale > 0 {
		if res.Params == nil {
			res.Params = map[string]string{}
		}
		res.Params["objective told the controllers"] = strconv.FormatFloat(o.SLOScale, 'g', -1, 64) + " × the case's"
	}
	if o.Stream {
		if res.Params == nil {
			res.Params = map[string]string{}
		}
		res.Params["culprit"] = "stream: each case's noisy client where it has one"
		if o.NoisyClients > 0 {
			res.Params["noisy clients"] = strconv.Itoa(o.NoisyClients)
		}
	}
	if o.HostLoad > 0 {
		if res.Params == nil {
			res.Params = map[string]string{}
		}
		res.Params["host load"] = strconv.Itoa(o.HostLoad) + " busy-looping processes during each run"
	}
	if o.NoCulprit {
		return executeNoCulprit(ctx, o, res)
	}
	hasNone := false
	for _, c := range o.Controllers {
		hasNone = hasNone || c.Name == "none"
	}
	perCase := 1 + len(o.Controllers)
	if !hasNone {
		perCase++
	}
	total := perCase * len(o.Cases)
	step := o.stepper(total)
	for _, c := range o.Cases {
		step(c.Name + ": normal")
		normal, nerr := runNormal(ctx, c, o, res)
		var uncontrolled *Run
		if !hasNone {
			step(c.Name + ": none")
			if r, err := runOne(ctx, c, none, true, o); err == nil {
				uncontrolled = r
				res.Runs = append(res.Runs, *r)
			}
		}
		for _, ctl := range o.Controllers {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			step(c.Name + ": " + ctl.Name)
			r, err := runOne(ctx, c, ctl, true, o)
			row := Row{Suite: c.Suite, Case: c.Name, Controller: ctl.Name}
			switch {
			case nerr != nil:
				row.Error = "normal run failed: " + nerr.Error()
			case err != nil:
				row.Error = err.Error()
			default:
				res.Runs = append(res.Runs, *r)
				if ctl.Name == "none" {
					uncontrolled = r
				}
				row = makeRow(c, ctl.Name, normal, uncontrolled, r)
			}
			res.Rows = append(res.Rows, row)
		}
		// The uncontrolled mean of rows computed before the "none" run.
		for i := range res.Rows {
			r := &res.Rows[i]
			if r.Case == c.Name && r.Error == "" && uncontrolled != nil {
				r.VictimMeanUncontrolledMs = uncontrolled.Light.MeanMs
				r.NoisyMeanUncMs = uncontrolled.Culprit.MeanMs
				derive(r)
			}
		}
	}
	if o.Progress != nil {
		o.Progress(total, total, "done")
	}
	return res, nil
}

// load is the multiplier of the cases' rates.
func (o Options) load() float64 {
	if o.Load > 0 {
		return o.Load
	}
	return 1
}

// stepper returns the function that reports each of total runs as it
// starts.
func (o Options) stepper(total int) func(what string) {
	done := 0
	return func(what string) {
		if o.Progress != nil {
			o.Progress(done, total, what)
		}
		done++
	}
}

// runNormal runs case c without its culprit and without control, and keeps
// the run in res under the name "normal".
func runNormal(ctx context.Context, c Case, o Options, res *Results) (*Run, error) {
	r, err := runOne(ctx, c, none, false, o)
	if err == nil {
		r.Controller = "normal"
		res.Runs = append(res.Runs, *r)
	}
	return r, err
}

// executeNoCulprit is Execute's NoCulprit mode.
func executeNoCulprit(ctx context.Context, o Options, res *Results) (*Results, error) {
	total := (1 + len(o.Controllers)) * len(o.Cases)
	step := o.stepper(total)
	for _, c := range o.Cases {
		step(c.Name + ": baseline")
		base, berr := runNormal(ctx, c, o, res)
		for _, ctl := range o.Controllers {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			step(c.Name + ": " + ctl.Name + " (no culprit)")
			r, err := runOne(ctx, c, ctl, false, o)
			row := Row{Suite: c.Suite, Case: c.Name, Controller: ctl.Name, NoCulprit: true}
			switch {
			case berr != nil:
				row.Error = "baseline run failed: " + berr.Error()
			case err != nil:
				row.Error = err.Error()
			default:
				res.Runs = append(res.Runs, *r)
				row = makeRow(c, ctl.Name, base, nil, r)
				row.NoCulprit, row.Degraded = true, nil
				if base.Light.P99Ms > 0 {
					row.P99Norm = r.Light.P99Ms / base.Light.P99Ms
				}
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if o.Progress != nil {
		o.Progress(total, total, "done")
	}
	return res, nil
}

// makeRow computes a row from the normal, uncontrolled and measured runs.
//
// The p99 is normalized by the normal run's p99, but by no less than a
// tenth of the case's objective: below that, differences between runs of a
// few-millisecond service are the scheduler's noise on a small machine,
// not the service's behaviour, and they made p99_norm vary by a quarter
// between identical runs.
func makeRow(c Case, name string, normal, uncontrolled, r *Run) Row {
	row := Row{Suite: c.Suite, Case: c.Name, Controller: name}
	if normal.Light.Throughput > 0 {
		row.ThroughputNorm = r.Light.Throughput / normal.Light.Throughput
	}
	if base := max(normal.Light.P99Ms, float64(c.slo())/1e6/10); base > 0 {
		row.P99Norm = r.Light.P99Ms / base
	}
	sent := r.Light.Sent + r.Culprit.Sent
	row.Rejected = r.Light.Rejected + r.Culprit.Rejected
	row.Reexecuted = r.Reexecuted
	row.ReexecutedOK = r.ReexecutedOK
	row.ReexecGaveUp, row.ReexecInterrupted = r.ReexecGaveUp, r.ReexecInterrupted
	// Cancellations are counted from the controller's acted decisions, by
	// the class of the task cancelled, so that a request cancelled and then
	// re-executed still counts; drops are the requests whose final answer
	// was a cancellation or a rejection.
	for _, e := range r.Events {
		switch e.Kind {
		case "cancel-culprit":
			row.CulpritsCancelled++
			row.WorkLost += e.Lost
		case "cancel-victim":
			row.VictimsCancelled++
			row.WorkLost += e.Lost
		}
	}
	row.Cancelled = row.CulpritsCancelled + row.VictimsCancelled
	var last time.Duration
	for _, e := range r.Events {
		switch e.Kind {
		case "penalize-victim":
			row.Penalties++
			row.VictimsPenalized++
		case "penalize-culprit":
			row.Penalties++
			if last == 0 || math.Abs(float64(e.Delay-last)) > 0.05*float64(last) {
				row.PenaltySteps++
			}
			last = e.Delay
			row.PenaltyFinalMs = float64(e.Delay) / 1e6
		}
	}
	if sent > 0 {
		row.DropRate = float64(row.Rejected+r.Light.Cancelled+r.Culprit.Cancelled) / float64(sent)
	}
	if r.Light.Sent > 0 {
		row.SLOAttainment = float64(r.Light.WithinSLO) / float64(r.Light.Sent)
	}
	row.VictimMeanNormalMs = normal.Light.MeanMs
	row.VictimMeanMs = r.Light.MeanMs
	row.NoisyMeanMs = r.Culprit.MeanMs
	if uncontrolled != nil {
		row.VictimMeanUncontrolledMs = uncontrolled.Light.MeanMs
		row.NoisyMeanUncMs = uncontrolled.Culprit.MeanMs
	}
	derive(&row)
	if name == "none" {
		d := row.ThroughputNorm <= 0.8 || row.P99Norm >= 2
		row.Degraded = &d
	}
	return row
}

// derive computes the ratios of a row from its means: the interference
// reduction r and the noisy tasks' slowdown.
func derive(row *Row) {
	row.InterferenceReduction = nil
	ti, ts, to := row.VictimMeanUncontrolledMs, row.VictimMeanMs, row.VictimMeanNormalMs
	if ti > 0 && ti-to > 0 {
		r := (ti - ts) / (ti - to)
		row.InterferenceReduction = &r
	}
	row.NoisySlowdown = 0
	if row.NoisyMeanUncMs > 0 {
		row.NoisySlowdown = row.NoisyMeanMs / row.NoisyMeanUncMs
	}
}

// runOne runs case c once under controller ctl, with or without its
// culprit. A panic anywhere in the run fails the run, not the invocation.
func runOne(ctx context.Context, c Case, ctl Controller, culprit bool, o Options) (run *Run, err error) {
	defer func() {
		if v := recover(); v != nil {
			run, err = nil, fmt.Errorf("%s under %s panicked: %v", c.Name, ctl.Name, v)
		}
	}()
	if o.HostLoad > 0 {
		stop, err := startHostLoad(ctx, o)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	rec := newRecorder()
	var epoch time.Time // set below, before any request; read by the observer
	var epochSet atomic.Bool
	observe := func(r policy.Record) {
		if r.Outcome != policy.Acted || !epochSet.Load() {
			return
		}
		if r.Action == policy.Diagnose {
			rec.event(Event{T: r.Time.Sub(epoch), Kind: "diagnose", Note: r.Reason})
			return
		}
		verb, done := "cancel", " cancelled by "
		if r.Action == policy.Penalize {
			verb, done = "penalize", " penalized by "
		}
		kind := verb + "-victim"
		if strings.HasPrefix(r.TaskClass, culpritClass) {
			kind = verb + "-culprit"
		}
		rec.event(Event{T: r.Time.Sub(epoch), Kind: kind, Delay: r.Delay, Lost: r.Lost, Note: r.TaskClass + done + r.Policy + ": " + r.Reason})
	}
	slo := c.slo()
	// The objective the controller is told; the metrics keep the case's.
	told := slo
	if o.SLOScale > 0 {
		told = time.Duration(float64(slo) * o.SLOScale)
	}
	var opts []moirai.Option
	if ctl.Options != nil {
		opts = ctl.Options(told)
	}
	var dec *metrics.Decisions
	if o.Metrics {
		dec = metrics.NewDecisions()
		harness := observe
		observe = func(r policy.Record) { harness(r); dec.Observe(r) }
	}
	mc := moirai.New(append(opts, moirai.WithDecisionObserver(observe))...)
	if o.Metrics {
		defer scrapeEvery(mc, dec, o.MetricsEvery)()
	}
	var leakedSlots int64
	if o.watch != nil {
		over := o.watch(mc)
		defer func() { over(mc.Close(), leakedSlots) }()
	} else {
		defer mc.Close()
	}
	notify := moirai.RetryNotify(func(time.Duration) {
		if epochSet.Load() {
			rec.event(Event{T: time.Since(epoch), Kind: "reexecute", Note: "culprit re-executed (the case's own task)"})
		}
	})
	svc, err := c.Build(&Env{Ctl: mc, Seed: o.Seed, Duration: o.Duration, Reexecute: ctl.Reexecute,
		// The cases' re-executions wait up to the bounded wait, as the
		// results were measured, rather than their requests' objective.
		RetryOptions: []moirai.RetryOption{notify, moirai.RetryMaxWait(30 * time.Second)}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	if svc.Close != nil {
		defer svc.Close()
	}
	var adm Admitter
	if ctl.Admitter != nil {
		adm = ctl.Admitter(told)
	}
	srv := &server{ctl: mc, svc: svc, adm: adm, reexecute: ctl.Reexecute, rec: rec}
	if svc.Workers > 0 {
		srv.workers = mc.Queue(workersName, svc.Workers, 0)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv.mux(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer func() {
		// Wait for the handlers (the load generator has cancelled what was
		// still running) before the service and the controller close.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
		if srv.workers != nil {
			leakedSlots = srv.workers.Running()
		}
	}()

	start := time.Now()
	epoch = start
	epochSet.Store(true)
	srv.epoch = start
	load := &loadgen{
		url:      "http://" + ln.Addr().String(),
		rate:     svc.Rate * o.load(),
		duration: o.Duration,
		drain:    drainOf(o.Duration),
		seed:     o.Seed,
		name:     c.Name,
		rec:      rec,
		start:    start,
	}
	if culprit {
		at := svc.CulpritAt
		if at <= 0 {
			at = 0.25
		}
		load.culpritAt = time.Duration(at * float64(o.Duration))
		if o.Stream && svc.Noisy != nil {
			load.noisy = svc.NoisyClients
			if o.NoisyClients > 0 {
				load.noisy = o.NoisyClients
			}
			if load.noisy <= 0 {
				load.noisy = 4
			}
			load.noisyUntil = min(load.culpritAt+o.Duration/2, o.Duration)
		}
	}
	if err := load.run(ctx); err != nil {
		return nil, err
	}
	run = rec.summarize(slo, o.Duration)
	run.Case, run.Controller, run.WithCulprit = c.Name, ctl.Name, culprit
	rs := mc.RetryStats()
	run.Reexecuted = int(rs.Reexecuted)
	run.ReexecutedOK = int(rs.Completed)
	run.ReexecGaveUp, run.ReexecInterrupted = int(rs.Dropped), int(rs.Interrupted)
	run.Duration = o.Duration
	if culprit {
		run.InjectedAt = load.culpritAt
		run.Events = append([]Event{{T: load.culpritAt, Kind: "culprit"}}, run.Events...)
	}
	return run, nil
}

// drainOf is how long a run of the given length waits, after its last
// arrival, for the requests still in flight: half the run (the culprits'
// length) plus two seconds, so that a culprit re-executed once the load
// has stopped, as Atropos re-executes, can finish.
func drainOf(d time.Duration) time.Duration { return d/2 + 2*time.Second }

// workersName is the resource of the harness's worker slots.
const workersName = "bench:workers"

// The classes of the harness's tasks.
const (
	lightClass   = "light"
	culpritClass = "culprit"
)

// server serves a case's service: it begins a task per request, runs
// admission, takes a worker slot, and answers with the outcome.
type server struct {
	ctl     *moirai.Controller
	svc     *Service
	adm     Admitter
	workers *moirai.Queue
	epoch   time.Time
	// reexecute serves requests through moirai.Retry: a request the
	// controller cancels is re-executed once its resources are free.
	reexecute bool
	rec       *recorder
}

func (s *server) now() time.Duration { return time.Since(s.epoch) }

func (s *server) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /light", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		s.serve(w, r, lightClass, func(ctx context.Context) error { return s.svc.Light(ctx, i) })
	})
	mux.HandleFunc("POST /culprit", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, culpritClass, s.svc.Culprit)
	})
	mux.HandleFunc("POST /noisy", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		if s.svc.Noisy == nil {
			http.Error(w, "this case has no noisy client", http.StatusNotFound)
			return
		}
		s.serve(w, r, culpritClass, func(ctx context.Context) error { return s.svc.Noisy(ctx, i) })
	})
	return mux
}

func (s *server) serve(w http.ResponseWriter, r *http.Request, class string, fn func(context.Context) error) {
	arrival := s.now()
	if s.adm != nil && !s.adm.Admit(arrival) {
		reply(w, errRejected)
		return
	}
	spec := moirai.Spec{Class: class, Cancellable: true}
	work := func(ctx context.Context) error {
		if s.workers != nil {
			p, err := s.workers.Enter(ctx)
			if err != nil {
				return err
			}
			defer p.Release()
		}
		started := s.now()
		if s.adm != nil && !s.adm.Started(started, started-arrival) {
			return errRejected
		}
		err := fn(ctx)
		if s.adm != nil {
			s.adm.Done(s.now(), s.now()-started)
		}
		return err
	}
	var err error
	if s.reexecute {
		err = moirai.Retry(r.Context(), s.ctl, spec, work, moirai.RetryMaxWait(30*time.Second), moirai.RetryNotify(func(time.Duration) {
			if s.rec != nil {
				s.rec.event(Event{T: s.now(), Kind: "reexecute", Note: class + " re-executed"})
			}
		}))
	} else {
		ctx, t := s.ctl.Begin(r.Context(), spec)
		err = work(ctx)
		t.End(err)
	}
	reply(w, err)
}

// reply writes the outcome of a request.
func reply(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		w.Header().Set(outcomeHeader, outcomeOK)
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, errRejected):
		w.Header().Set(outcomeHeader, outcomeReject)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	case errors.Is(err, moirai.ErrCancelled):
		w.Header().Set(outcomeHeader, outcomeCancel)
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		w.Header().Set(outcomeHeader, outcomeFail)
		w.WriteHeader(http.StatusInternalServerError)
	}
}

// maxInFlight bounds the light requests outstanding at once: past it the
// load generator sheds arrivals (counted as failed) rather than grow
// without bound.
const maxInFlight = 4096

// loadgen sends a case's open-loop load and its culprit, and records
// every request.
type loadgen struct {
	url       string
	rate      float64
	duration  time.Duration
	culpritAt time.Duration // 0: no culprit
	// noisy > 0 sends, from culpritAt to noisyUntil, that many noisy
	// clients instead of the culprit request.
	noisy      int
	noisyUntil time.Duration
	drain      time.Duration // after duration, for requests in flight
	seed       uint64
	name       string
	rec        *recorder
	start      time.Time
}

func (l *loadgen) run(ctx context.Context) error {
	// Requests may finish during the drain after the last arrival; what
	// is still running at its end is cancelled and counted unfinished.
	reqCtx, stopReqs := context.WithTimeout(ctx, l.duration+l.drain)
	defer stopReqs()
	ctx, stop := context.WithTimeout(reqCtx, l.duration)
	defer stop()
	censor := l.duration + l.drain
	tr := &http.Transport{MaxIdleConnsPerHost: maxInFlight, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	send := func(path string, culprit bool) (outcome string) {
		at := time.Since(l.start)
		req, _ := http.NewRequestWithContext(reqCtx, http.MethodPost, l.url+path, nil)
		resp, err := client.Do(req)
		end := time.Since(l.start)
		r := result{culprit: culprit, start: at, end: end}
		switch {
		case err != nil && reqCtx.Err() != nil:
			r.outcome, r.end = outcomeUnfinished, censor
		case err != nil:
			r.outcome = outcomeFail
		default:
			r.outcome = resp.Header.Get(outcomeHeader)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if reqCtx.Err() != nil && r.outcome != outcomeOK {
				r.outcome, r.end = outcomeUnfinished, censor
			}
		}
		l.rec.add(r)
		return r.outcome
	}
	if l.culpritAt > 0 && l.noisy > 0 {
		var n atomic.Int64
		for range l.noisy {
			wg.Go(func() {
				if sleep.For(ctx, l.culpritAt) != nil {
					return
				}
				for ctx.Err() == nil && time.Since(l.start) < l.noisyUntil {
					if send(fmt.Sprintf("/noisy?i=%d", n.Add(1)-1), true) != outcomeOK {
						// A refused or failed request is retried after a
						// client's pause, not in a tight loop.
						if sleep.For(ctx, noisyRetry) != nil {
							return
						}
					}
				}
			})
		}
	} else if l.culpritAt > 0 {
		wg.Go(func() {
			if sleep.For(ctx, l.culpritAt) == nil {
				send("/culprit", true)
			}
		})
	}
	// Poisson arrivals: exponential gaps from a source seeded by the
	// invocation's seed and the case, so every run of a case sends the same
	// schedule.
	rng := rand.New(rand.NewPCG(l.seed, hash(l.name)))
	var inflight atomic.Int64
	next := time.Duration(0)
	for i := 0; ; i++ {
		next += time.Duration(rng.ExpFloat64() / l.rate * float64(time.Second))
		if next >= l.duration {
			break
		}
		if d := next - time.Since(l.start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		if inflight.Load() >= maxInFlight {
			l.rec.add(result{start: next, end: next, outcome: outcomeShed})
			continue
		}
		inflight.Add(1)
		path := fmt.Sprintf("/light?i=%d", i)
		wg.Go(func() {
			defer inflight.Add(-1)
			send(path, false)
		})
	}
	<-ctx.Done()
	wg.Wait() // the drain: until every request ended or reqCtx expired
	return nil
}

// noisyRetry is how long a noisy client waits after a request that was
// not served before it sends the next.
const noisyRetry = 10 * time.Millisecond

// hash is FNV-1a, to derive a case's random stream from its name.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// CurrentMachine describes the machine the harness runs on.
func CurrentMachine() Machine {
	m := Machine{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// scrapeEvery registers mc's collector and dec on a registry of their own
// and gathers it every interval (100 ms if not positive) until the
// returned function is called, as a Prometheus server would, only far
// more often.
func scrapeEvery(mc *moirai.Controller, dec *metrics.Decisions, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(mc), dec)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, _ = reg.Gather()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

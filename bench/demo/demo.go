// Package demo is the embedded service behind `moirai demo`: a small HTTP
// service whose table lock is monopolized by one long transaction, and a live
// view of what moirai's runtime sees while it happens.
//
// # The scenario
//
// The service owns one instrumented lock, "table:orders", taken with
// [moirai.Controller.Mutex]. Every request is a cancellable moirai task,
// begun by a small handler wrapper with [moirai.Controller.Begin] and ended
// with [moirai.Task.End]:
//
//   - light inserts (POST /orders) arrive open-loop, as a Poisson process
//     drawn from a seeded generator, and take the table lock for about a
//     millisecond each;
//   - after a quarter of the run one culprit (POST /report), a long
//     "SELECT … FOR UPDATE" transaction, holds the table lock for up to
//     1.5 s at a time, in several batches, reporting its progress; the
//     inserts queue behind it.
//
// The load runs over real loopback HTTP (a net/http server on 127.0.0.1:0
// and a net/http client). It is bounded in count and in time and stops by
// itself: after the run's duration no new request is sent, in-flight ones are
// drained (or cancelled if they do not finish in time), the server is shut
// down gracefully and the controller is closed.
//
// # Without control, then with moirai
//
// [Run] runs the scenario twice with the same seed and configuration: first
// without control (the controller only traces: moirai.WithoutMechanisms), then
// with moirai's defaults, targeted cancellation on an objective of
// [Config.SLO] (p99 of the inserts). Without control the culprit runs to
// its end and the inserts' tail grows with its batches. With moirai the
// controller sees the inserts queue behind the culprit, finds the table
// lock contended and the culprit the one task whose cancellation frees it,
// and cancels it through its context: the culprit stops at its next safe
// point, its transaction rolls back and its request fails with 503 and the
// cause (moirai.ErrCancelled and the reason). The demo does not retry it; a
// real client would, with moirai.Retry, once the table is free.
// [Config.Only] runs one of the two.
//
// # What is printed
//
// Each run starts with a header naming it. Every refresh interval, [Run]
// takes [moirai.Controller.Snapshot] and prints what the runtime sees: per
// resource its holders, waiters and the wait and hold accrued since the
// previous refresh, the tasks that have waited or held longest, with what
// they hold or wait for and for how long, and the controller's last
// decision. At the end of a run it prints the decisions the controller took
// (from moirai.WithDecisionObserver), each with its one-line reason and its
// details: contention per resource, candidates, their scores and gains,
// and how many were excluded and why; then a [Summary]: requests done,
// client-measured insert latency, how many inserts waited behind the
// culprit, how the culprit ended. After both runs it prints them side by
// side. With [JSON] the same goes out as one object per line.
//
// The numbers are measured, not scripted, and vary from run to run and
// machine to machine; the story does not: without control the culprit
// completes, with moirai it is cancelled and no insert is.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// Limits of a Config.
const (
	// MinDuration is the shortest run: below it the culprit has no room to
	// show.
	MinDuration = 2 * time.Second
	// MaxDuration bounds a run.
	MaxDuration = time.Hour
	// MaxRate bounds the insert rate, so that the requests in flight stay
	// within the load generator's bound.
	MaxRate = 1000
	// MinInterval is the shortest refresh interval.
	MinInterval = 50 * time.Millisecond
)

// Defaults of the command-line flags.
const (
	DefaultDuration = 6 * time.Second // two runs: about 15 s in all
	DefaultRate     = 50
	DefaultInterval = 500 * time.Millisecond
	DefaultSeed     = 1
)

// TableLock is the name of the demo's contended resource.
const TableLock = "table:orders"

// ErrInvalidConfig is wrapped by the errors [Config.Validate] returns.
var ErrInvalidConfig = errors.New("demo: invalid configuration")

// Format selects how [Run] prints.
type Format uint8

const (
	// Table prints human-readable blocks.
	Table Format = iota
	// JSON prints one JSON object per line. Per run: "start", one
	// "refresh" per interval, one "decision" per decision of the
	// controller, then a "summary", each with a "run" field (RunNone or
	// RunMoirai); after both runs, a "compare" with the two side by side.
	JSON
)

// Config describes one run of the demo. It is plain data; the zero value is
// not valid (see [Config.Validate]).
type Config struct {
	Duration time.Duration // length of the load, at least MinDuration
	Seed     uint64        // seed of the arrival process
	Rate     float64       // inserts per second, open loop, in (0, MaxRate]
	Interval time.Duration // between live refreshes, in [MinInterval, Duration]
	Format   Format        // Table or JSON
	// Redraw clears the screen before each refresh (ANSI escape codes).
	// Set it only when Out is a terminal and Format is Table.
	Redraw bool
	Out    io.Writer // where to print; nil discards
	// SLO is the latency objective of the inserts (p99) in the run with
	// moirai; zero means DefaultSLO.
	SLO time.Duration
	// Only runs one of the two runs: RunNone or RunMoirai; "" runs both.
	Only string
	// OnController, when set, is called with each run's controller as soon
	// as it exists (the live page follows the run in progress).
	OnController func(mode string, ctl *moirai.Controller)
}

// The runs of a demo.
const (
	RunNone   = "none"   // without control: moirai traces, nothing acts
	RunMoirai = "moirai" // with moirai's defaults: targeted cancellation
)

// DefaultSLO is the inserts' objective in the run with moirai.
const DefaultSLO = 50 * time.Millisecond

// Validate reports whether c can be run. Its errors wrap ErrInvalidConfig
// and name the flag to fix.
func (c Config) Validate() error {
	switch {
	case c.Duration < MinDuration:
		return fmt.Errorf("%w: --duration %v is too short: the demo needs at least %v (the culprit starts after a quarter of the run)",
			ErrInvalidConfig, c.Duration, MinDuration)
	case c.Duration > MaxDuration:
		return fmt.Errorf("%w: --duration %v is longer than %v", ErrInvalidConfig, c.Duration, MaxDuration)
	case !(c.Rate > 0 && c.Rate <= MaxRate): // also refuses NaN
		return fmt.Errorf("%w: --rate %v must be in (0, %d] requests/s", ErrInvalidConfig, c.Rate, MaxRate)
	case c.Interval < MinInterval || c.Interval > c.Duration:
		return fmt.Errorf("%w: --interval %v must be between %v and the duration (%v)",
			ErrInvalidConfig, c.Interval, MinInterval, c.Duration)
	case c.Format != Table && c.Format != JSON:
		return fmt.Errorf("%w: unknown format %d", ErrInvalidConfig, c.Format)
	case c.SLO < 0 || c.SLO > 0 && c.SLO < time.Millisecond:
		return fmt.Errorf("%w: --slo %v must be at least 1ms", ErrInvalidConfig, c.SLO)
	case c.Only != "" && c.Only != RunNone && c.Only != RunMoirai:
		return fmt.Errorf("%w: --only %q must be %q or %q", ErrInvalidConfig, c.Only, RunNone, RunMoirai)
	}
	return nil
}

func (c Config) slo() time.Duration {
	if c.SLO > 0 {
		return c.SLO
	}
	return DefaultSLO
}

// Summary is the outcome of a run.
type Summary struct {
	Run     string        // RunNone or RunMoirai
	Elapsed time.Duration // from the first request to the controller's close

	Sent   int64 // inserts sent
	OK     int64 // inserts answered with success
	Failed int64 // inserts that failed (error or non-2xx status)
	Shed   int64 // arrivals not sent: too many requests already in flight

	// Client-side latency of the successful inserts.
	P50, P99, Max time.Duration
	// Samples are every insert, by the time it was sent (the report's
	// time series).
	Samples []Sample

	// BehindCulprit counts the inserts that waited for the table lock while
	// the culprit held it (measured by the service).
	BehindCulprit int64

	CulpritBatches int    // batches of the culprit's transaction planned
	CulpritDone    int    // batches completed
	CulpritBatch   int    // the last batch it began, from 1 (0: it never took the lock)
	CulpritErr     string // why the culprit failed, "" if it succeeded

	// What the runtime showed in the live refreshes.
	Refreshes          int // refreshes printed
	PeakWaiters        int // most waiters on the table lock in one refresh
	CulpritSeenHolding int // refreshes in which the culprit held the table lock

	RuntimeErrors int64 // errors the controller reported (invalid specs, tasks never ended)

	// Decisions the controller took, in order (none without control).
	Decisions []Decision
	// Baseline is the run without control, when [Run] ran both: the
	// summary Run returns is the run with moirai's.
	Baseline *Summary
}

// Decision is one decision of the controller, as the demo shows it: a
// [policy.Record] with its time made relative to the run's start.
type Decision struct {
	At      time.Duration // since the run's start
	Policy  string
	Action  string // cancel, …
	Outcome string // acted, skipped, dry-run
	Task    uint64 // the task acted on
	Class   string // its class
	Key     string // its key
	Reason  string // the one-line explanation
	Note    string // why it was skipped, or what acting returned
	Details string // the details on one line, key=value, groups in brackets
	// Attrs are the details as the policy gave them: contention per
	// resource, candidates, gains, scores, exclusions.
	Attrs []slog.Attr
}

func decisionOf(r policy.Record, start time.Time) Decision {
	return Decision{
		At: r.Time.Sub(start), Policy: r.Policy, Action: r.Action.String(), Outcome: r.Outcome.String(),
		Task: r.Task, Class: r.TaskClass, Key: r.TaskKey, Reason: r.Reason, Note: r.Note,
		Details: formatAttrs(r.Details), Attrs: r.Details,
	}
}

// CulpritCancelled reports whether the controller cancelled the culprit.
func (s *Summary) CulpritCancelled() bool { return s.CulpritsCancelled() > 0 }

// InsertsCancelled counts the inserts the controller cancelled: its
// victims, had it chosen them.
func (s *Summary) InsertsCancelled() int { return s.acted(classInsert, policy.Cancel) }

// CulpritsCancelled counts the culprit's cancellations (0 or 1).
func (s *Summary) CulpritsCancelled() int { return s.acted(classReport, policy.Cancel) }

// CulpritPenalties counts the penalties the culprit was given (between
// its batches, before the cancellation).
func (s *Summary) CulpritPenalties() int { return s.acted(classReport, policy.Penalize) }

// acted counts the decisions of the action acted on tasks of class.
func (s *Summary) acted(class string, action policy.Action) int {
	n := 0
	for _, d := range s.Decisions {
		if d.Outcome == policy.Acted.String() && d.Class == class && d.Action == action.String() {
			n++
		}
	}
	return n
}

// insertWork is how long an insert holds the table lock.
const insertWork = time.Millisecond

// maxCulpritHold is the longest the culprit holds the lock in one batch.
const maxCulpritHold = 1500 * time.Millisecond

// shutdownTimeout bounds the server's graceful shutdown.
const shutdownTimeout = 5 * time.Second

// errRunOver is the cause with which requests still running after the drain
// period are cancelled.
var errRunOver = errors.New("demo: run over, request cancelled")

// plan is the culprit's schedule, derived from the duration.
type plan struct {
	start   time.Duration // when the culprit's request is sent
	hold    time.Duration // how long it holds the lock per batch
	batches int
}

func planFor(d time.Duration) plan {
	p := plan{start: d / 4, hold: min(maxCulpritHold, d/4)}
	// Leave the last tenth of the run for the queue to drain.
	p.batches = max(1, int((d*9/10-p.start)/p.hold))
	return p
}

// Run runs the demo described by cfg, printing to cfg.Out, and returns its
// summary: the run with moirai's, with the run without control as its
// Baseline (or the one run cfg.Only asks for). It returns early, with the
// summary so far and ctx's cause, if ctx is done first. Every task it
// begins is ended, and the error of [moirai.Controller.Close] (tasks never
// ended) is returned if there is one.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	runs := []string{RunNone, RunMoirai}
	if cfg.Only != "" {
		runs = []string{cfg.Only}
	}
	var prev *Summary
	var sum Summary
	for i, mode := range runs {
		var err error
		sum, err = runOne(ctx, cfg, out, mode, i+1, len(runs))
		sum.Baseline = prev
		if err != nil || ctx.Err() != nil {
			return sum, err
		}
		done := sum
		prev = &done
		if i+1 < len(runs) && cfg.Format == Table {
			fmt.Fprintln(out)
		}
	}
	if len(runs) == 2 {
		if err := printCompare(out, cfg, sum.Baseline, &sum); err != nil {
			return sum, fmt.Errorf("demo: write output: %w", err)
		}
	}
	return sum, nil
}

// runOne runs the scenario once, without control or with moirai's.
func runOne(ctx context.Context, cfg Config, out io.Writer, mode string, nth, of int) (Summary, error) {
	var runtimeErrs atomic.Int64
	var (
		decMu     sync.Mutex
		decisions []Decision
		started   time.Time
	)
	opts := []moirai.Option{moirai.WithErrorHandler(func(error) { runtimeErrs.Add(1) })}
	if mode == RunNone {
		opts = append(opts, moirai.WithoutMechanisms())
	} else {
		opts = append(opts, moirai.WithSLO(0.99, cfg.slo()), moirai.WithDecisionObserver(func(r policy.Record) {
			decMu.Lock()
			defer decMu.Unlock()
			decisions = append(decisions, decisionOf(r, started))
		}))
	}
	ctl := moirai.New(opts...)
	if cfg.OnController != nil {
		cfg.OnController(mode, ctl)
	}
	svc := newService(ctl)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Summary{}, errors.Join(fmt.Errorf("demo: listen: %w", err), ctl.Close())
	}
	// Handlers' contexts derive from srvCtx, so that requests still running
	// after the drain period can be cancelled.
	srvCtx, cancelSrv := context.WithCancelCause(context.Background())
	defer cancelSrv(nil)
	srv := &http.Server{
		Handler:           svc.handler(),
		BaseContext:       func(net.Listener) context.Context { return srvCtx },
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	p := planFor(cfg.Duration)
	ld := newLoad("http://"+ln.Addr().String(), cfg)
	pr := newPrinter(out, cfg, ln.Addr().String(), p)
	pr.run, pr.nth, pr.of = mode, nth, of

	start := time.Now()
	ld.t0 = start
	decMu.Lock()
	started = start
	decMu.Unlock()
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	reqCtx, cancelReq := context.WithCancelCause(context.Background())
	defer cancelReq(nil)

	pr.start()
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		ld.generate(runCtx, reqCtx)
	}()
	ld.culprit(runCtx, reqCtx, p)

	// Live view until the run is over.
	var (
		snap  snapshot.Snapshot
		view  View
		last  time.Duration
		prev  = map[string]cumulative{}
		tick  = time.NewTicker(cfg.Interval)
		peak  int
		seen  int
		count int
	)
	for live := true; live; {
		select {
		case <-runCtx.Done():
			live = false
			continue
		case <-tick.C:
		}
		ctl.SnapshotInto(&snap)
		view = buildView(&snap, prev, maxTasks, last)
		last = snap.At
		view.Elapsed = time.Since(start)
		view.Scenario = scenario(svc, ld, p)
		decMu.Lock()
		view.Decisions = len(decisions)
		view.LastDecision = nil
		if n := len(decisions); n > 0 {
			d := decisions[n-1]
			view.LastDecision = &d
		}
		decMu.Unlock()
		pr.refresh(&view)
		count++
		if r := view.resource(TableLock); r != nil {
			peak = max(peak, r.Waiters)
			if view.holding(TableLock, classReport) {
				seen++
			}
		}
	}
	tick.Stop()
	<-genDone

	// Drain: the requests in flight finish by themselves; past the drain
	// period they are cancelled, through the server's base context and the
	// client's.
	interrupted := ctx.Err() != nil
	if interrupted || !ld.wait(p.hold+2*time.Second) {
		cancelSrv(errRunOver)
		cancelReq(errRunOver)
		ld.wait(-1)
	}
	sctx, cancelShutdown := context.WithTimeout(context.Background(), shutdownTimeout)
	shutdownErr := srv.Shutdown(sctx)
	cancelShutdown()
	if shutdownErr != nil {
		cancelSrv(errRunOver)
		shutdownErr = errors.Join(fmt.Errorf("demo: server shutdown: %w", shutdownErr), srv.Close())
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		shutdownErr = errors.Join(shutdownErr, fmt.Errorf("demo: serve: %w", err))
	}
	ld.close()
	closeErr := ctl.Close()

	sum := ld.summary()
	sum.Run = mode
	decMu.Lock()
	sum.Decisions = decisions
	decMu.Unlock()
	sum.Elapsed = time.Since(start)
	sum.BehindCulprit = svc.behind.Load()
	sum.CulpritBatches = p.batches
	sum.CulpritDone = int(svc.batchesDone.Load())
	sum.CulpritBatch = int(svc.batch.Load())
	sum.CulpritErr = ld.culpritErr()
	sum.Refreshes = count
	sum.PeakWaiters = peak
	sum.CulpritSeenHolding = seen
	sum.RuntimeErrors = runtimeErrs.Load()
	pr.summary(&sum, closeErr)

	err = errors.Join(shutdownErr, closeErr)
	if interrupted {
		err = errors.Join(context.Cause(ctx), err)
	}
	if werr := pr.err(); werr != nil {
		err = errors.Join(err, fmt.Errorf("demo: write output: %w", werr))
	}
	return sum, err
}

// scenario describes, from the service's and load generator's own
// bookkeeping (not from the runtime), where the scenario is.
func scenario(svc *service, ld *load, p plan) Scenario {
	return Scenario{
		Sent:           ld.sent.Load(),
		Done:           ld.ok.Load() + ld.failed.Load(),
		InFlight:       ld.inflight.Load(),
		CulpritState:   svc.culpritState(),
		CulpritBatch:   int(svc.batch.Load()),
		CulpritBatches: p.batches,
	}
}

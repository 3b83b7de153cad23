// Package demo is the embedded service behind `moirai demo`: a small HTTP
// service whose table lock is monopolized by one long transaction, and a live
// view of what moirai's runtime sees while it happens.
//
// # The scenario
//
// The service owns one instrumented lock, "table:orders", taken with
// [moirai.Controller.Mutex]. Every request is a moirai task, begun by a small
// handler wrapper with [moirai.Controller.Begin] and ended with
// [moirai.Task.End]:
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
// # What is printed
//
// Every refresh interval, [Run] takes [moirai.Controller.Snapshot] and prints
// what the runtime sees: per resource its holders, waiters and the wait and
// hold accrued since the previous refresh, and the tasks that have waited or
// held longest, with what they hold or wait for and for how long. At the end
// it prints a [Summary]: requests done, client-measured insert latency, how
// many inserts waited behind the culprit.
//
// # Without control, then with moirai
//
// [Run] runs the scenario twice with the same seed: first without control
// (the controller only traces: moirai.WithTraceOnly), then with moirai's
// defaults, targeted cancellation on an objective of [Config.SLO]. In the
// second run the controller sees the inserts queue behind the culprit,
// confirms that the table lock is contended, and cancels the culprit
// through its context; the demo prints each decision with its reasons
// (contention, candidates, gains, why others were left out) and then the
// two runs side by side. [Config.Only] runs one of the two.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
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
	DefaultDuration = 10 * time.Second
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
	// JSON prints one JSON object per line: "start", then one "refresh"
	// per interval, then a "summary".
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

	// BehindCulprit counts the inserts that waited for the table lock while
	// the culprit held it (measured by the service).
	BehindCulprit int64

	CulpritBatches int    // batches of the culprit's transaction planned
	CulpritDone    int    // batches completed
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

// Decision is one decision of the controller, as the demo shows it.
type Decision struct {
	At      time.Duration // since the run's start
	Policy  string
	Outcome string // acted, skipped, dry-run
	Class   string // the class of the task acted on
	Reason  string
	Details string // contention, candidates, gains, exclusions
}

// CulpritCancelled reports whether the controller cancelled the culprit.
func (s *Summary) CulpritCancelled() bool {
	for _, d := range s.Decisions {
		if d.Outcome == policy.Acted.String() && d.Class == classReport {
			return true
		}
	}
	return false
}

// InsertsCancelled counts the inserts the controller cancelled.
func (s *Summary) InsertsCancelled() int {
	n := 0
	for _, d := range s.Decisions {
		if d.Outcome == policy.Acted.String() && d.Class == classInsert {
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
		opts = append(opts, moirai.WithTraceOnly())
	} else {
		opts = append(opts, moirai.WithSLO(0.99, cfg.slo()), moirai.WithDecisionObserver(func(r policy.Record) {
			decMu.Lock()
			defer decMu.Unlock()
			decisions = append(decisions, Decision{
				At: r.Time.Sub(started), Policy: r.Policy, Outcome: r.Outcome.String(),
				Class: r.TaskClass, Reason: r.Reason, Details: formatAttrs(r.Details),
			})
		}))
	}
	ctl := moirai.New(opts...)
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

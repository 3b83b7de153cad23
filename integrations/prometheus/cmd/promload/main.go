// Command promload runs Prometheus's query path in process (its TSDB, its
// PromQL engine and its HTTP API, package web/api/v1, on loopback, in a
// temporary directory) and measures, with the official client
// (client_golang's api/prometheus/v1), what heavy dashboard queries do to
// the light queries beside them.
//
// The engine runs at most -max-concurrency queries at once; the others
// wait for a slot. The load is open loop: victims (light instant queries,
// as alerting rules and small panels send them) are sent at their
// scheduled times, whatever the server's state, and their latency counts
// from the scheduled time. The culprit is a dashboard refresh: every
// -period, -parallel range queries over every series of the data, as a
// dashboard's heavy panels send them at once. Each run of -runs is one
// remedy: none, moirai, timeout (--query.timeout), max-samples
// (--query.max-samples) or concurrency (--query.max-concurrency raised to
// its default, 20); "normal" is the load without the culprit; "oracle"
// is the bound of a controller that acts on evidence (see oracle). The runs
// share the data, one after the other, each on an engine and API of its
// own; each prints one JSON line.
//
// Built from Prometheus's released source, the moirai remedy is refused;
// built with integrations/prometheus/prometheus.patch applied (see package
// build), it runs the API under a moirai controller.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/integrations/prometheus/moiraiprom"
	"github.com/moirai-go/moirai/integrations/prometheus/moiraiprom/progress"
	"github.com/moirai-go/moirai/integrations/serverbuild"
	"github.com/moirai-go/moirai/policy"
)

type config_ struct {
	series         int
	span           time.Duration
	queryRange     time.Duration
	scrape         time.Duration
	concurrency    int
	parallel       int
	period         time.Duration
	victimRate     float64
	warmup         time.Duration
	duration       time.Duration
	slo            time.Duration
	timeout        time.Duration
	maxSamples     int
	raisedSlots    int
	seed           uint64
	runs           []string
	debug          bool
	raw            bool
	tick           time.Duration
	minCancel      time.Duration
	settle         time.Duration
	maxInflight    int
	defaultSamples int
}

func main() {
	var c config_
	var runs string
	flag.IntVar(&c.series, "series", 5_000, "series loaded before the runs: http_requests_total of 200 jobs")
	flag.DurationVar(&c.span, "span", time.Hour, "the data's span, ending now")
	flag.DurationVar(&c.queryRange, "range", 30*time.Minute, "the culprit's range: its queries cover the last this much of the data")
	flag.DurationVar(&c.scrape, "scrape", 15*time.Second, "the data's scrape interval, and the range queries' step")
	flag.IntVar(&c.concurrency, "max-concurrency", 2, "the engine's query slots (--query.max-concurrency): the machine's cores")
	flag.IntVar(&c.parallel, "parallel", 2, "the culprit's range queries per dashboard refresh, sent at once")
	flag.DurationVar(&c.period, "period", 2*time.Second, "the culprit's period (the dashboard's refresh)")
	flag.Float64Var(&c.victimRate, "victim-rate", 100, "victim instant queries per second")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured start of each run")
	flag.DurationVar(&c.duration, "duration", 6*time.Second, "measured length of each run")
	flag.DurationVar(&c.slo, "slo", 50*time.Millisecond, "the victims' latency objective (moirai's WithSLO at p99)")
	flag.DurationVar(&c.timeout, "timeout", 500*time.Millisecond, "remedy timeout: the engine's --query.timeout")
	flag.IntVar(&c.maxSamples, "max-samples", 200_000, "remedy max-samples: the engine's --query.max-samples")
	flag.IntVar(&c.raisedSlots, "raised-concurrency", 20, "remedy concurrency: --query.max-concurrency raised to this (Prometheus's default)")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the victims' jobs")
	flag.StringVar(&runs, "runs", "normal,none", "runs, in order: normal, none, moirai, moirai-normal (moirai without the culprit), oracle (the bound of a controller acting at the first wait), timeout, max-samples, concurrency")
	flag.BoolVar(&c.debug, "debug", false, "print the controller's decisions on stderr")
	flag.BoolVar(&c.raw, "raw", false, "add each victim's latency (latencies_ms, ok ones, measured part) to the output")
	flag.DurationVar(&c.tick, "tick", 0, "the moirai controller's coarse tick (0: moirai's default); the fine tick is a quarter of it")
	flag.DurationVar(&c.minCancel, "min-cancel-interval", 0, "the moirai controller's least time between two cancellations (0: moirai's default, 100ms)")
	flag.DurationVar(&c.settle, "settle", 4*time.Second, "after the load, the victims' load alone for this long, unmeasured")
	flag.Parse()
	c.runs = strings.Split(runs, ",")
	c.maxInflight = 2000
	c.defaultSamples = 50_000_000 // --query.max-samples's default
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "promload:", err)
		os.Exit(1)
	}
}

// Result is one run's line of output: the part every integration's load
// program shares, and Prometheus's own.
type Result struct {
	serverbuild.Result
	Series  int     `json:"series"`
	Seconds float64 `json:"seconds"`
}

func run(c config_) error {
	var ctl *moirai.Controller
	if slices.ContainsFunc(c.runs, func(r string) bool { return strings.HasPrefix(r, "moirai") }) {
		if slices.ContainsFunc(c.runs, func(r string) bool { return !strings.HasPrefix(r, "moirai") }) {
			return errors.New("-runs: moirai runs cannot share a process with the others")
		}
		opts := []moirai.Option{moirai.WithSLO(0.99, c.slo), moirai.WithPenalties(false)}
		if c.tick > 0 {
			opts = append(opts, moirai.WithTick(c.tick, c.tick/4))
		}
		if c.minCancel > 0 {
			opts = append(opts, moirai.WithMinCancelInterval(c.minCancel))
		}
		if c.debug {
			lg := slog.New(slog.NewTextHandler(os.Stderr, nil))
			opts = append(opts, moirai.WithLogger(lg), moirai.WithDecisionObserver(func(r policy.Record) {
				lg.LogAttrs(context.Background(), slog.LevelInfo, "decision", r.Attrs()...)
			}))
		}
		ctl = moirai.New(opts...)
		defer ctl.Close()
	}
	dir, err := os.MkdirTemp("", "promload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := tsdb.Open(filepath.Join(dir, "data"), logger, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	end, err := preload(db, c)
	if err != nil {
		return err
	}
	// The load's aftermath before any run: the head's full chunks written
	// out and the appends' garbage collected, so that the first run does
	// not pay for them.
	db.ForceHeadMMap()
	runtime.GC()
	enc := json.NewEncoder(os.Stdout)
	settled := false
	var tracker *moiraiprom.Tracker
	for i, r := range c.runs {
		srv, err := serve(c, r, db, ctl, filepath.Join(dir, fmt.Sprintf("run%d", i)), &tracker)
		if err != nil {
			return fmt.Errorf("run %s: %w", r, err)
		}
		if !settled && c.settle > 0 {
			sc := c
			sc.warmup, sc.duration = 0, c.settle
			if _, err := oneRun(sc, "normal", srv, end, c.seed+1000); err != nil {
				srv.close()
				return fmt.Errorf("settling: %w", err)
			}
			settled = true
		}
		if ctl != nil && !progress.Reported() {
			srv.close()
			return errors.New("remedy moirai: this binary's Prometheus is the released one; build it with prometheus.patch applied")
		}
		res, err := oneRun(c, r, srv, end, c.seed+uint64(i))
		srv.close()
		if err != nil {
			return fmt.Errorf("run %s: %w", r, err)
		}
		res.Patched = progress.Reported()
		if ctl != nil {
			res.Cancelled = ctl.Stats().Cancelled - srv.cancelled0
		}
		if srv.oracle != nil {
			res.Cancelled = int64(srv.oracle.Cancelled())
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// preload appends c.series counters of 200 jobs, one sample every c.scrape
// over c.span ending now, and returns the last sample's time.
func preload(db *tsdb.DB, c config_) (time.Time, error) {
	end := time.Now().Truncate(c.scrape)
	start := end.Add(-c.span)
	lset := make([]labels.Labels, c.series)
	for i := range lset {
		lset[i] = labels.FromStrings("__name__", "http_requests_total", "job", job(i%200),
			"instance", fmt.Sprintf("10.0.%d.%d:9090", i/200/250, i/200%250), "code", []string{"200", "500"}[i/200%2])
	}
	rng := rand.New(rand.NewPCG(7, 7))
	vals := make([]float64, c.series)
	ctx := context.Background()
	for t := start; !t.After(end); t = t.Add(c.scrape) {
		app := db.Appender(ctx)
		for i, l := range lset {
			vals[i] += float64(rng.IntN(100))
			if _, err := app.Append(0, l, t.UnixMilli(), vals[i]); err != nil {
				_ = app.Rollback()
				return end, fmt.Errorf("preload: %w", err)
			}
		}
		if err := app.Commit(); err != nil {
			return end, fmt.Errorf("preload: %w", err)
		}
	}
	return end, nil
}

func job(i int) string { return fmt.Sprintf("job-%03d", i) }

type server struct {
	url        string
	hs         *http.Server
	cancelled0 int64
	oracle     *oracle // the run "oracle"'s
	client     promv1.API
	culprit    promv1.API
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.hs.Shutdown(ctx)
}

// serve starts an engine and the HTTP API on db, configured as the run's
// remedy says, and returns the clients of its victims and of its culprit.
func serve(c config_, run string, db *tsdb.DB, ctl *moirai.Controller, dir string, shared **moiraiprom.Tracker) (*server, error) {
	slots, samples, timeout := c.concurrency, c.defaultSamples, 2*time.Minute // Prometheus's defaults, but the slots
	switch run {
	case "normal", "none", "moirai", "moirai-normal", "oracle":
	case "timeout":
		timeout = c.timeout
	case "max-samples":
		samples = c.maxSamples
	case "concurrency":
		slots = c.raisedSlots
	default:
		return nil, fmt.Errorf("unknown run %q", run)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	aqt, err := promql.NewActiveQueryTracker(dir, slots, logger)
	if err != nil {
		return nil, err
	}
	var tracker promql.QueryTracker = aqt
	var orc *oracle
	if run == "oracle" {
		orc = newOracle(aqt)
		tracker = orc
	}
	if ctl != nil {
		// One resource per controller: the moirai runs of a process share
		// the first one's tracker (their slots are alike).
		if *shared == nil {
			t, err := moiraiprom.NewTracker(ctl, aqt)
			if err != nil {
				return nil, err
			}
			*shared = t
		}
		tracker = *shared
	}
	ng := promql.NewEngine(promql.EngineOpts{
		Logger: logger, MaxSamples: samples, Timeout: timeout, ActiveQueryTracker: tracker,
		LookbackDelta: 5 * time.Minute,
	})
	reg := prometheus.NewRegistry()
	papi := apiv1.NewAPI(ng, db, nil, nil,
		func(context.Context) apiv1.ScrapePoolsRetriever { return nil },
		func(context.Context) apiv1.TargetRetriever { return nil },
		func(context.Context) apiv1.AlertmanagerRetriever { return nil },
		func() config.Config { return config.Config{} },
		nil, apiv1.GlobalURLOptions{},
		func(f http.HandlerFunc) http.HandlerFunc { return f },
		nil, dir, false, false, 0, logger,
		func(context.Context) apiv1.RulesRetriever { return nil },
		0, 0, 0, false, nil,
		func() (apiv1.RuntimeInfo, error) { return apiv1.RuntimeInfo{}, nil },
		&apiv1.PrometheusVersion{},
		nil, nil, reg, reg, nil,
		false, nil, false, false, false,
		5*time.Minute, false, false, nil, nil,
		apiv1.OpenAPIOptions{}, parser.NewParser(parser.Options{}), false, 0)
	r := route.New()
	papi.Register(r.WithPrefix("/api/v1"))
	var h http.Handler = r
	srv := &server{oracle: orc}
	if orc != nil {
		h = orc.handler(h)
	}
	if ctl != nil {
		h = moiraiprom.Handler(ctl, h)
		srv.cancelled0 = ctl.Stats().Cancelled
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv.url = "http://" + l.Addr().String()
	srv.hs = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.hs.Serve(l) }()
	newClient := func() (promv1.API, error) {
		cli, err := api.NewClient(api.Config{Address: srv.url, RoundTripper: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}})
		if err != nil {
			return nil, err
		}
		return promv1.NewAPI(cli), nil
	}
	if srv.client, err = newClient(); err != nil {
		srv.close()
		return nil, err
	}
	if srv.culprit, err = newClient(); err != nil {
		srv.close()
		return nil, err
	}
	return srv, nil
}

type sample struct {
	sched   time.Duration
	latency time.Duration
	err     error
}

// errType returns the API's error type of err ("canceled", "timeout",
// "execution", ...), or "" if err is not the API's.
func errType(err error) string {
	var e *promv1.Error
	if errors.As(err, &e) {
		return string(e.Type)
	}
	return ""
}

// cancelled reports whether err is a query the moirai controller
// cancelled: the API answers a query whose context ended "canceled", with
// status 499 (which the client reports as a client error without reading
// the answer's error type), and no client here cancels its own.
func cancelled(err error) bool {
	var e *promv1.Error
	return errType(err) == string(promv1.ErrCanceled) ||
		errors.As(err, &e) && e.Type == promv1.ErrClient && strings.Contains(e.Msg, "499")
}

// timedOut reports whether err is a query past the engine's timeout: the
// API answers it 503, which the client reports as a server error without
// reading the answer's error type.
func timedOut(err error) bool {
	var e *promv1.Error
	return errType(err) == string(promv1.ErrTimeout) ||
		errors.As(err, &e) && e.Type == promv1.ErrServer && strings.Contains(e.Msg, "503")
}

func oneRun(c config_, name string, srv *server, end time.Time, seed uint64) (Result, error) {
	withCulprit := name != "normal" && name != "moirai-normal"
	total := c.warmup + c.duration
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := time.Now()
	rng := rand.New(rand.NewPCG(seed, 41))
	type plan struct {
		at  time.Duration
		job int
	}
	var plans []plan
	if c.victimRate > 0 {
		step := time.Duration(float64(time.Second) / c.victimRate)
		for at := time.Duration(rng.Int64N(int64(step))); at < total; at += step {
			plans = append(plans, plan{at, rng.IntN(200)})
		}
	}
	samples := make([]sample, len(plans))
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.maxInflight)
	var cres culpritResult
	var cwg sync.WaitGroup
	if withCulprit {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			cres = sendCulprits(ctx, c, srv.culprit, start, c.warmup/2, total, end)
		}()
	}
	for i, p := range plans {
		if d := time.Until(start.Add(p.at)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			q := fmt.Sprintf(`sum(rate(http_requests_total{job=%q}[5m]))`, job(p.job))
			_, _, _, err := srv.client.Query(rctx, q, end)
			samples[i] = sample{sched: p.at, latency: time.Since(start.Add(p.at)), err: err}
		}()
	}
	wg.Wait()
	stop()
	cwg.Wait()
	res := summarize(c, name, samples)
	res.CulpritSent, res.CulpritOK, res.CulpritCancel = cres.sent, cres.ok, cres.cancelled
	res.CulpritTimeout, res.CulpritFailed, res.CulpritLimited = cres.timedOut, cres.failed, cres.limited
	res.WorkLost = cres.lost.Seconds()
	if cres.done > 0 {
		res.CulpritMeanMs = ms(cres.busy / time.Duration(cres.done))
	}
	if cres.firstErr != nil {
		res.CulpritError = cres.firstErr.Error()
	}
	return res, nil
}

type culpritResult struct {
	sent, ok, cancelled, timedOut, failed, limited, done int
	busy, lost                                           time.Duration
	firstErr                                             error
}

// culpritQuery is a heavy panel's query: a rate over every series, summed
// by job.
const culpritQuery = `sum by (job) (rate(http_requests_total[5m]))`

// sendCulprits refreshes the dashboard every c.period from first until
// stop (times from start): c.parallel range queries at once, each over
// the last c.queryRange of the data. It waits for them.
func sendCulprits(ctx context.Context, c config_, cli promv1.API, start time.Time, first, stop time.Duration, end time.Time) culpritResult {
	var (
		mu  sync.Mutex
		res culpritResult
		wg  sync.WaitGroup
	)
	for at := first; at < stop; at += c.period {
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		for range c.parallel {
			res.sent++
			wg.Add(1)
			go func() {
				defer wg.Done()
				qctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				t0 := time.Now()
				_, _, _, err := cli.QueryRange(qctx, culpritQuery, promv1.Range{Start: end.Add(-c.queryRange), End: end, Step: c.scrape})
				took := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				res.done++
				res.busy += took
				switch {
				case err == nil:
					res.ok++
				case cancelled(err):
					res.cancelled++
					res.lost += took
				case timedOut(err):
					res.timedOut++
					res.lost += took
				default:
					// Refused past --query.max-samples, or failed.
					res.failed++
					res.lost += took
					if res.firstErr == nil {
						res.firstErr = err
					}
				}
			}()
		}
	}
	wg.Wait()
	return res
}

func summarize(c config_, name string, samples []sample) Result {
	res := Result{Result: serverbuild.Result{Run: name}, Series: c.series, Seconds: c.duration.Seconds()}
	var all []time.Duration
	var sum time.Duration
	var within int
	last := c.warmup + c.duration
	for _, s := range samples {
		if s.sched < c.warmup {
			continue
		}
		res.Victims++
		switch {
		case s.err == nil:
			res.VictimsOK++
			all = append(all, s.latency)
			sum += s.latency
			if s.latency <= c.slo {
				within++
			}
			last = max(last, s.sched+s.latency)
		case cancelled(s.err):
			res.VictimsCancel++
		default:
			res.VictimsFailed++
			if res.FirstError == "" {
				res.FirstError = s.err.Error()
			}
		}
	}
	res.P50Ms, res.P99Ms = ms(quantile(all, 0.5)), ms(quantile(all, 0.99))
	if c.raw {
		for _, l := range all {
			res.LatenciesMs = append(res.LatenciesMs, ms(l))
		}
	}
	if len(all) > 0 {
		res.MeanMs = ms(sum / time.Duration(len(all)))
	}
	// Completions over the time they took: a backlog that drains after
	// the window lowers the throughput.
	res.Throughput = float64(res.VictimsOK) / (last - c.warmup).Seconds()
	if res.Victims > 0 {
		res.SLOAttainment = float64(within) / float64(res.Victims)
	}
	return res
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

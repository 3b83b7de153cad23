// Command etcdload runs an etcd server in process (package embed, on
// loopback, in a temporary directory) and measures, with the official
// client (clientv3), what a large range does to the requests beside it.
//
// The load is open loop: victims (puts to a small key space and small
// ranges over the large one) are sent at their scheduled times, whatever
// the server's state, and their latency counts from the scheduled time.
// The culprit is a range over a large share of the keys, sent periodically
// as in the reports (etcd-io/etcd#7719 and #8202). Each run of -runs is one
// remedy: none, moirai, timeout, ratelimit or paginate; "normal" is the
// load without the culprit; "oracle" is the bound of a controller that
// acts on evidence (moiraietcd.InstallOracle: the large range cancelled
// the moment a write waits behind it). The runs share the server and its keys, one
// after the other; each prints one JSON line.
//
// Built from etcd's released source, the moirai remedy is refused; built
// with integrations/etcd/etcd.patch applied (see package build), it runs
// the server under a moirai controller.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/integrations/etcd/moiraietcd"
	"github.com/moirai-go/moirai/integrations/serverbuild"
	"github.com/moirai-go/moirai/policy"
)

type config struct {
	keys        int
	valueSize   int
	culprit     string
	period      time.Duration
	putRate     float64
	rangeRate   float64
	warmup      time.Duration
	duration    time.Duration
	slo         time.Duration
	timeout     time.Duration
	limitEvery  time.Duration
	page        int
	seed        uint64
	runs        []string
	maxInflight int
	debug       bool
	raw         bool
	tick        time.Duration
	preempt     int
	settle      time.Duration
	slow        time.Duration
}

func main() {
	var c config
	var runs string
	flag.IntVar(&c.keys, "keys", 400_000, "keys loaded before the runs, under /registry/pods/")
	flag.IntVar(&c.valueSize, "value-size", 128, "bytes of each loaded key's value")
	flag.StringVar(&c.culprit, "culprit", "keys", "the large range: keys (keys only, as etcdctl get --keys-only), count (count only) or full (keys and values)")
	flag.DurationVar(&c.period, "period", time.Second, "the culprit's period")
	flag.Float64Var(&c.putRate, "put-rate", 300, "victim puts per second")
	flag.Float64Var(&c.rangeRate, "range-rate", 300, "victim small ranges per second")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured start of each run")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "measured length of each run")
	flag.DurationVar(&c.slo, "slo", 50*time.Millisecond, "the victims' latency objective (moirai's WithSLO at p99)")
	flag.DurationVar(&c.timeout, "timeout", 100*time.Millisecond, "remedy timeout: the client's deadline on the large range")
	flag.DurationVar(&c.limitEvery, "limit-every", 3*time.Second, "remedy ratelimit: at most one large range per this interval (token bucket, burst 1)")
	flag.IntVar(&c.page, "page", 1000, "remedy paginate: keys per page")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the victims' keys")
	flag.StringVar(&runs, "runs", "normal,none", "runs, in order: normal, none, moirai, moirai-normal (moirai without the culprit), oracle (the bound of a controller acting at the first wait; the patched build, alone), timeout, ratelimit, paginate")
	flag.BoolVar(&c.debug, "debug", false, "print the controller's decisions on stderr")
	flag.BoolVar(&c.raw, "raw", false, "add each victim's latency (latencies_ms, ok ones, measured part) to the output")
	flag.IntVar(&c.preempt, "preempt", 1, "moirai cancels a large range as it takes the index once this many of its class were cancelled as culprits (moirai.WithPreemption; 0: never)")
	flag.DurationVar(&c.tick, "tick", 0, "the moirai controller's coarse tick (0: moirai's default, 20ms); the fine tick is a quarter of it")
	flag.DurationVar(&c.settle, "settle", 3*time.Second, "after the load, the victims' load alone for this long, unmeasured: the first run would otherwise pay for the load's aftermath (the backend's commits, the collector)")
	flag.DurationVar(&c.slow, "slow", 0, "print on stderr each culprit's start and length, and each victim slower than this (0: none): where a run's tail comes from")
	flag.Parse()
	c.runs = strings.Split(runs, ",")
	c.maxInflight = 2000
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "etcdload:", err)
		os.Exit(1)
	}
}

// Result is one run's line of output: the part every integration's load
// program shares (victims: puts and small ranges, pooled), and etcd's own.
type Result struct {
	serverbuild.Result
	Culprit    string  `json:"culprit"`
	Keys       int     `json:"keys"`
	Seconds    float64 `json:"seconds"`
	PutP99Ms   float64 `json:"put_p99_ms"`
	RangeP99Ms float64 `json:"range_p99_ms"`
}

func run(c config) error {
	ctl := (*moirai.Controller)(nil)
	if slices.ContainsFunc(c.runs, func(r string) bool { return strings.HasPrefix(r, "moirai") }) {
		if slices.ContainsFunc(c.runs, func(r string) bool { return !strings.HasPrefix(r, "moirai") }) {
			return errors.New("-runs: moirai runs cannot share a server with the others")
		}
		opts := []moirai.Option{moirai.WithSLO(0.99, c.slo), moirai.WithPenalties(false), moirai.WithPreemption(c.preempt)}
		if c.tick > 0 {
			opts = append(opts, moirai.WithTick(c.tick, c.tick/4))
		}
		if c.debug {
			lg := slog.New(slog.NewTextHandler(os.Stderr, nil))
			opts = append(opts, moirai.WithLogger(lg), moirai.WithDecisionObserver(func(r policy.Record) {
				lg.LogAttrs(context.Background(), slog.LevelInfo, "decision", r.Attrs()...)
			}))
		}
		ctl = moirai.New(opts...)
		defer ctl.Close()
		uninstall, err := moiraietcd.Install(ctl)
		if err != nil {
			return err
		}
		defer uninstall()
	}
	var oracleCancelled func() int
	var oracleIntercept grpc.UnaryServerInterceptor
	if slices.Contains(c.runs, "oracle") {
		if len(c.runs) != 1 {
			return errors.New("-runs: the oracle runs alone")
		}
		var uninstall func()
		oracleIntercept, oracleCancelled, uninstall = moiraietcd.InstallOracle(isCulprit)
		defer uninstall()
	}
	dir, err := os.MkdirTemp("", "etcdload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	// The machine's disk is shared: fsync latency would be its neighbours'.
	cfg.UnsafeNoFsync = true
	cu, pu, err := loopbackURLs()
	if err != nil {
		return err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if ctl != nil {
		cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainUnaryInterceptor(moiraietcd.UnaryServerInterceptor(ctl))}
	}
	if oracleIntercept != nil {
		cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainUnaryInterceptor(oracleIntercept)}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return errors.New("etcd not ready after 30s")
	}
	patched := moiraietcd.Created() > 0
	if (ctl != nil || oracleIntercept != nil) && !patched {
		return errors.New("remedies moirai and oracle: this binary's etcd is the released one; build it with etcd.patch applied")
	}
	newClient := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{cu.Host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}
	victims, err := newClient()
	if err != nil {
		return err
	}
	defer victims.Close()
	culprit, err := newClient()
	if err != nil {
		return err
	}
	defer culprit.Close()
	if err := preload(victims, c); err != nil {
		return err
	}
	if c.settle > 0 {
		sc := c
		sc.warmup, sc.duration = 0, c.settle
		if _, err := oneRun(sc, "normal", victims, culprit, ctl, c.seed+1000); err != nil {
			return fmt.Errorf("settling: %w", err)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	for i, r := range c.runs {
		res, err := oneRun(c, r, victims, culprit, ctl, c.seed+uint64(i))
		if err != nil {
			return fmt.Errorf("run %s: %w", r, err)
		}
		if oracleCancelled != nil {
			res.Cancelled = int64(oracleCancelled())
		}
		res.Patched = patched
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

func loopbackURLs() (client, peer url.URL, err error) {
	var us [2]url.URL
	for i := range us {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, err
		}
		us[i] = url.URL{Scheme: "http", Host: l.Addr().String()}
		l.Close()
	}
	return us[0], us[1], nil
}

const prefix = "/registry/pods/"

func key(i int) string { return fmt.Sprintf("%s%08d", prefix, i) }

// preload writes c.keys keys, 128 puts per transaction (etcd's default
// --max-txn-ops), from 8 clients.
func preload(cli *clientv3.Client, c config) error {
	val := strings.Repeat("v", c.valueSize)
	const per, workers = 128, 8
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				start := int(next.Add(per)) - per
				if start >= c.keys {
					errs <- nil
					return
				}
				ops := make([]clientv3.Op, 0, per)
				for i := start; i < min(start+per, c.keys); i++ {
					ops = append(ops, clientv3.OpPut(key(i), val))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Txn(ctx).Then(ops...).Commit()
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

type sample struct {
	put     bool
	sched   time.Duration
	latency time.Duration
	err     error
}

// cancelled reports whether err is a request the moirai controller
// cancelled (moiraietcd's answer).
func cancelled(err error) bool {
	return status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "cancelled")
}

func oneRun(c config, name string, victims, culprit *clientv3.Client, ctl *moirai.Controller, seed uint64) (Result, error) {
	withCulprit := name != "normal" && name != "moirai-normal"
	switch name {
	case "normal", "none", "moirai", "moirai-normal", "oracle", "timeout", "ratelimit", "paginate":
	default:
		return Result{}, fmt.Errorf("unknown run %q", name)
	}
	var before int64
	if ctl != nil {
		before = ctl.Stats().Cancelled
	}
	total := c.warmup + c.duration
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := time.Now()
	rng := rand.New(rand.NewPCG(seed, 40))
	type plan struct {
		at  time.Duration
		put bool
		k   int
	}
	var plans []plan
	for _, p := range []struct {
		rate float64
		put  bool
	}{{c.putRate, true}, {c.rangeRate, false}} {
		if p.rate <= 0 {
			continue
		}
		step := time.Duration(float64(time.Second) / p.rate)
		for at := time.Duration(rng.Int64N(int64(step))); at < total; at += step {
			plans = append(plans, plan{at, p.put, rng.IntN(max(c.keys-10, 1))})
		}
	}
	slices.SortFunc(plans, func(a, b plan) int { return int(a.at - b.at) })
	samples := make([]sample, len(plans))
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.maxInflight)
	val := strings.Repeat("w", 64)

	// The culprit, periodic from the end of the warmup's first half.
	var cres culpritResult
	var cwg sync.WaitGroup
	if withCulprit {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			cres = sendCulprits(ctx, c, name, culprit, start, c.warmup/2, total)
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
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			if p.put {
				_, err = victims.Put(rctx, fmt.Sprintf("/victims/%04d", p.k%1000), val)
			} else {
				_, err = victims.Get(rctx, key(p.k), clientv3.WithRange(key(p.k+10)))
			}
			samples[i] = sample{put: p.put, sched: p.at, latency: time.Since(start.Add(p.at)), err: err}
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
	if ctl != nil {
		res.Cancelled = ctl.Stats().Cancelled - before
	}
	return res, nil
}

type culpritResult struct {
	sent, ok, cancelled, timedOut, failed, limited, done int
	busy, lost                                           time.Duration
	firstErr                                             error
}

// sendCulprits sends the large range every c.period from first until end
// (times from start), each in its own goroutine, as the remedy of run
// says, and waits for them.
func sendCulprits(ctx context.Context, c config, run string, cli *clientv3.Client, start time.Time, first, end time.Duration) culpritResult {
	var (
		mu  sync.Mutex
		res culpritResult
		wg  sync.WaitGroup
	)
	lim := rate.NewLimiter(rate.Every(c.limitEvery), 1)
	for at := first; at < end; at += c.period {
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if run == "ratelimit" && !lim.Allow() {
			// The operator's limiter holds the large range back: the
			// client skips this period's read.
			res.limited++
			continue
		}
		res.sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			err := largeRange(c, run, cli)
			took := time.Since(t0)
			if c.slow > 0 {
				fmt.Fprintf(os.Stderr, "run=%s culprit at=%v took=%v err=%v\n", run, t0.Sub(start), took, err)
			}
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
			case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
				res.timedOut++
				res.lost += took
			default:
				res.failed++
				if res.firstErr == nil {
					res.firstErr = err
				}
			}
		}()
	}
	wg.Wait()
	return res
}

// largeRange reads half the loaded keys, as the reports' clients did
// (7719: 300,000 of 600,000 keys).
func largeRange(c config, run string, cli *clientv3.Client) error {
	from, to := key(0), key(c.keys/2)
	opts := []clientv3.OpOption{clientv3.WithRange(to)}
	switch c.culprit {
	case "keys":
		opts = append(opts, clientv3.WithKeysOnly())
	case "count":
		opts = append(opts, clientv3.WithCountOnly())
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), culpritMD, "1"), 60*time.Second)
	if run == "timeout" {
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
	}
	defer cancel()
	if run != "paginate" || c.culprit == "count" {
		_, err := cli.Get(ctx, from, opts...)
		return err
	}
	// Pages at one revision, as kube-apiserver's chunked lists.
	var rev int64
	for {
		popts := append(slices.Clip(opts), clientv3.WithLimit(int64(c.page)))
		if rev > 0 {
			popts = append(popts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, popts...)
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func summarize(c config, name string, samples []sample) Result {
	res := Result{Result: serverbuild.Result{Run: name}, Culprit: c.culprit, Keys: c.keys, Seconds: c.duration.Seconds()}
	var all, puts, ranges []time.Duration
	var sum time.Duration
	var within int
	last := c.warmup + c.duration
	for _, s := range samples {
		if s.sched < c.warmup {
			continue
		}
		res.Victims++
		if c.slow > 0 && s.latency > c.slow {
			fmt.Fprintf(os.Stderr, "run=%s victim at=%v took=%v put=%v err=%v\n", name, s.sched, s.latency, s.put, s.err)
		}
		switch {
		case s.err == nil:
			res.VictimsOK++
			all = append(all, s.latency)
			sum += s.latency
			if s.put {
				puts = append(puts, s.latency)
			} else {
				ranges = append(ranges, s.latency)
			}
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
	res.PutP99Ms, res.RangeP99Ms = ms(quantile(puts, 0.99)), ms(quantile(ranges, 0.99))
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

// culpritMD is the metadata key that marks the large ranges for the
// oracle, which knows the culprit by construction.
const culpritMD = "etcdload-culprit"

// isCulprit reports whether the call in ctx is a large range.
func isCulprit(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(culpritMD)) > 0
}

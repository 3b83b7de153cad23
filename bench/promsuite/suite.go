// Package promsuite is the prometheus suite of moirai bench: a real
// server's reported overload, Prometheus's heavy queries holding the PromQL
// engine's --query.max-concurrency slots while light queries wait behind
// them, on Prometheus v0.316.0's released source, under no control, under
// moirai integrated by a patch, and under the remedies a Prometheus
// operator has today.
//
// The server and its load are the integration module's program
// (integrations/prometheus, cmd/promload): Prometheus's TSDB, engine and
// HTTP API in process, on loopback, and an open-loop load on the official
// client (client_golang). This package does not import Prometheus: it
// builds that program twice with the integration module's cmd/prombuild
// (on the released module, and on its source from the module cache with
// prometheus.patch applied) and runs the builds as child processes,
// reading one JSON line per run. So Prometheus, whose module needs a newer
// go than the workspace's, stays out of the bench module's graph.
//
// # Runs
//
// Each round starts the released build once (runs: the load without the
// culprit, then under none, timeout, max-samples and concurrency, on one
// process and its data, each run on an engine and API of its own) and the
// patched build once (moirai). A row pools its rounds' victims (their p99
// is the pooled victims' p99) and compares them with the pooled runs
// without the culprit: p99_norm and throughput_norm. The spread is the
// rounds' own p99_norm, in the results' params. With NoCulprit every run
// goes without the culprit: the released build twice (the second is the
// none row: the noise between two identical runs) and the patched one
// under moirai (its cost).
package promsuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "prometheus"

// Defaults of Options.
const (
	DefaultDuration = 6 * time.Second
	DefaultWarmup   = time.Second
	// DefaultSeries is the series loaded: http_requests_total of 200
	// jobs, one hour at a 15s scrape interval.
	DefaultSeries = 5_000
)

// Case is one shape of the culprit.
type Case struct {
	Name string
	// Parallel is cmd/promload's -parallel: the dashboard's heavy queries
	// per refresh, sent at once.
	Parallel int
	Describe string
}

// Cases returns the suite's cases.
func Cases() []Case {
	return []Case{
		{"dashboard", 2, "every 2s, a dashboard refresh: 2 range queries at once, a rate over every series summed by job over 30 minutes, as many as the engine has slots"},
	}
}

// Controller is a way to run the server.
type Controller struct {
	Name     string
	Describe string
	patched  bool
}

// Controllers returns the suite's controllers: none, moirai, and the
// operators' remedies.
func Controllers() []Controller {
	return []Controller{
		{"none", "Prometheus v0.316.0 as released, --query.max-concurrency=2 (the machine's cores)", false},
		{"moirai", "Prometheus v0.316.0 with integrations/prometheus/prometheus.patch: API requests as tasks (httpmw), the engine's query slots a moirai semaphore (its QueryTracker wrapped), the evaluation's progress reported", true},
		{"timeout", "released; --query.timeout=500ms: the engine stops a query past it (Prometheus's default is 2m)", false},
		{"max-samples", "released; --query.max-samples=200000: the engine refuses a query that loads more samples at once (the default is 50,000,000)", false},
		{"concurrency", "released; --query.max-concurrency raised to 20 (Prometheus's default): no query waits for a slot, all share the CPUs", false},
	}
}

// Options configure Execute.
type Options struct {
	// Dir is the integration module's directory (integrations/prometheus);
	// empty: found from the working directory up.
	Dir         string
	Cases       []Case
	Controllers []Controller
	Rounds      int
	Warmup      time.Duration
	Duration    time.Duration
	Series      int
	Seed        uint64
	NoCulprit   bool
	Progress    func(done, total int, what string)
}

// Select returns the cases and controllers named in the comma-separated
// lists ("all": every one).
func Select(cases, controllers string) ([]Case, []Controller, error) {
	cs, err := pick(cases, Cases(), func(c Case) string { return c.Name })
	if err != nil {
		return nil, nil, err
	}
	ctls, err := pick(controllers, Controllers(), func(c Controller) string { return c.Name })
	return cs, ctls, err
}

func pick[T any](list string, all []T, name func(T) string) ([]T, error) {
	if list == "all" || list == "" {
		return all, nil
	}
	var out []T
	for n := range strings.SplitSeq(list, ",") {
		i := slices.IndexFunc(all, func(t T) bool { return name(t) == strings.TrimSpace(n) })
		if i < 0 {
			names := make([]string, len(all))
			for j, t := range all {
				names[j] = name(t)
			}
			return nil, fmt.Errorf("promsuite: unknown %q (have %s)", n, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// FindDir returns the integration module's directory above the working
// directory.
func FindDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(d, "integrations", "prometheus")
		if _, err := os.Stat(filepath.Join(p, "prometheus.patch")); err == nil {
			return p, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("promsuite: no integrations/prometheus/prometheus.patch above the working directory; run from the repository")
		}
		d = up
	}
}

// binaries is cmd/prombuild's output.
type binaries struct {
	Released, Patched, Server string
	Added, Removed            int
}

// runResult is one line of cmd/promload's output.
type runResult struct {
	Run            string    `json:"run"`
	Patched        bool      `json:"patched"`
	Victims        int       `json:"victims"`
	VictimsOK      int       `json:"victims_ok"`
	VictimsFailed  int       `json:"victims_failed"`
	VictimsCancel  int       `json:"victims_cancelled"`
	P99Ms          float64   `json:"p99_ms"`
	MeanMs         float64   `json:"mean_ms"`
	Throughput     float64   `json:"throughput"`
	SLOAttainment  float64   `json:"slo_attainment"`
	CulpritSent    int       `json:"culprit_sent"`
	CulpritOK      int       `json:"culprit_ok"`
	CulpritCancel  int       `json:"culprit_cancelled"`
	CulpritTimeout int       `json:"culprit_timed_out"`
	CulpritFailed  int       `json:"culprit_failed"`
	CulpritLimited int       `json:"culprit_held_back"`
	CulpritMeanMs  float64   `json:"culprit_mean_ms"`
	WorkLost       float64   `json:"work_lost"`
	Cancelled      int64     `json:"controller_cancellations"`
	FirstError     string    `json:"first_error"`
	CulpritError   string    `json:"culprit_error"`
	LatenciesMs    []float64 `json:"latencies_ms"`
}

// Execute builds the server twice and runs every case under every
// controller, o.Rounds times, interleaved.
func Execute(ctx context.Context, o Options) (*bench.Results, error) {
	if o.Rounds < 1 {
		o.Rounds = 1
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Warmup <= 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Series <= 0 {
		o.Series = DefaultSeries
	}
	if len(o.Cases) == 0 || len(o.Controllers) == 0 {
		return nil, errors.New("promsuite: no case or no controller")
	}
	if o.Dir == "" {
		d, err := FindDir()
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	res := &bench.Results{
		Suite: Suite, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(),
		Params: map[string]string{
			"server":   "Prometheus's TSDB, PromQL engine and HTTP API (web/api/v1) in process, loopback; --query.max-concurrency=2 but in the concurrency row; one process per build, case and round, one engine and API per run",
			"series":   fmt.Sprintf("%d series of http_requests_total (200 jobs), one hour at a 15s scrape interval, appended before the runs", o.Series),
			"victims":  "open loop, 100 instant queries/s, sum(rate(http_requests_total{job=J}[5m])) for a random job J of 25 series; latency from the scheduled time; objective p99 ≤ 50ms",
			"warm-up":  o.Warmup.String(),
			"loadavg0": loadavg(),
		},
	}
	if o.Rounds > 1 {
		res.Params["rounds"] = fmt.Sprintf("%d, interleaved; round k's arrivals from seed %d+k; a row pools its rounds' victims", o.Rounds, o.Seed)
	}
	total := 1 + o.Rounds*len(o.Cases)*2
	done := 0
	step := func(what string) {
		if o.Progress != nil {
			o.Progress(done, total, what)
		}
		done++
	}
	step("building Prometheus: released and patched")
	tmp, err := os.MkdirTemp("", "moirai-prometheus-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bins, err := build(ctx, o.Dir, filepath.Join(tmp, "build"))
	if err != nil {
		return nil, err
	}
	res.Params["prometheus"] = fmt.Sprintf("github.com/prometheus/prometheus %s; patch: %d lines added, %d removed", bins.Server, bins.Added, bins.Removed)

	var released, patched []string
	for _, c := range o.Controllers {
		switch {
		case o.NoCulprit && c.patched:
			patched = append(patched, "moirai-normal")
		case o.NoCulprit && c.Name == "none":
			released = append(released, "normal")
		case o.NoCulprit:
			// The remedies act only on the culprit: without it they
			// are the released server.
		case c.patched:
			patched = append(patched, c.Name)
		default:
			released = append(released, c.Name)
		}
	}
	released = append([]string{"normal"}, released...)
	type key struct{ kase, run string }
	pooled := map[key]*measured{}
	byRound := map[key][]string{}
	failed := map[key]string{}
	for round := range o.Rounds {
		seed := o.Seed + uint64(round)
		for _, c := range o.Cases {
			groups := [][2]any{{bins.Released, released}}
			if len(patched) > 0 {
				groups = append(groups, [2]any{bins.Patched, patched})
			}
			var base *runResult
			for _, g := range groups {
				bin, runs := g[0].(string), g[1].([]string)
				what := c.Name + ": " + strings.Join(runs, ", ")
				if o.Rounds > 1 {
					what = fmt.Sprintf("round %d/%d: %s", round+1, o.Rounds, what)
				}
				step(what)
				if err := ctx.Err(); err != nil {
					return res, err
				}
				out, err := runLoad(ctx, bin, c, o, seed, runs)
				for i, r := range runs {
					k := key{c.Name, rowName(r, i, o.NoCulprit)}
					if err != nil {
						failed[k] = err.Error()
						continue
					}
					rr := out[i]
					if i == 0 && r == "normal" {
						base = &rr
					}
					if pooled[k] == nil {
						pooled[k] = &measured{}
					}
					pooled[k].add(rr)
					if b := p99(base.latencies()); b > 0 && k.run != "normal" {
						byRound[k] = append(byRound[k], strconv.FormatFloat(p99(rr.LatenciesMs)/b, 'f', 2, 64))
					}
				}
			}
		}
	}
	res.Params["loadavg1"] = loadavg()
	for _, c := range o.Cases {
		base := pooled[key{c.Name, "normal"}]
		if base == nil {
			for _, ctl := range o.Controllers {
				res.Rows = append(res.Rows, bench.Row{Suite: Suite, Case: c.Name, Controller: ctl.Name, NoCulprit: o.NoCulprit,
					Error: "the run without the culprit failed: " + failed[key{c.Name, "normal"}]})
			}
			continue
		}
		for _, ctl := range o.Controllers {
			if o.NoCulprit && ctl.Name != "none" && !ctl.patched {
				continue
			}
			k := key{c.Name, ctl.Name}
			m := pooled[k]
			if m == nil {
				msg := failed[k]
				if msg == "" {
					msg = "no run"
				}
				res.Rows = append(res.Rows, bench.Row{Suite: Suite, Case: c.Name, Controller: ctl.Name, NoCulprit: o.NoCulprit, Error: msg})
				continue
			}
			row := m.row(c.Name, ctl.Name, base, o.NoCulprit)
			if none := pooled[key{c.Name, "none"}]; none != nil && !o.NoCulprit {
				row.VictimMeanUncontrolledMs = none.mean()
			}
			res.Rows = append(res.Rows, row)
			if o.Rounds > 1 {
				res.Params["p99_norm by round: "+c.Name+"/"+ctl.Name] = strings.Join(byRound[k], ", ")
			}
			if !o.NoCulprit {
				res.Params["culprit: "+c.Name+"/"+ctl.Name] = m.fate()
			}
			if m.failed > 0 {
				// A remedy that fails victims (the engine's timeout
				// counts their wait for a slot) is measured, not broken:
				// the failures are the row's drop rate.
				res.Params["victims failed: "+c.Name+"/"+ctl.Name] = fmt.Sprintf("%d of %d; first: %s", m.failed, m.victims, m.firstError)
			}
		}
	}
	if o.Progress != nil {
		o.Progress(total, total, "done")
	}
	return res, nil
}

// rowName is the row a run of cmd/promload feeds: its run name, except
// that without the culprit the released build's second "normal" is the
// none row and the patched build's "moirai-normal" the moirai row.
func rowName(run string, i int, noCulprit bool) string {
	switch {
	case noCulprit && run == "normal" && i > 0:
		return "none"
	case run == "moirai-normal":
		return "moirai"
	}
	return run
}

func build(ctx context.Context, dir, out string) (binaries, error) {
	var b binaries
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/prombuild", "-out", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		return b, fmt.Errorf("promsuite: building Prometheus: %w: %s", err, tail(stderr.Bytes()))
	}
	if err := json.Unmarshal(o, &b); err != nil {
		return b, fmt.Errorf("promsuite: building Prometheus: %w", err)
	}
	return b, nil
}

// runLoad runs one cmd/promload process and returns its runs' results.
func runLoad(ctx context.Context, bin string, c Case, o Options, seed uint64, runs []string) ([]runResult, error) {
	cmd := exec.CommandContext(ctx, bin,
		"-parallel", strconv.Itoa(c.Parallel), "-series", strconv.Itoa(o.Series),
		"-warmup", o.Warmup.String(), "-duration", o.Duration.String(),
		"-seed", strconv.FormatUint(seed, 10), "-runs", strings.Join(runs, ","), "-raw")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, tail(stderr.Bytes()))
	}
	var rs []runResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r runResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(bin), err)
		}
		rs = append(rs, r)
	}
	if len(rs) != len(runs) {
		return nil, fmt.Errorf("%s: %d results for %d runs", filepath.Base(bin), len(rs), len(runs))
	}
	return rs, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// measured pools the runs of one (case, controller) over the rounds.
type measured struct {
	latencies                     []float64
	victims, ok, failed, cancel   int
	within                        float64 // victims within the objective
	throughput                    float64 // summed over runs
	runs                          int
	sent, cok, ccancel, ctimeout  int
	cfailed, climited             int
	culpritMs                     float64 // summed over runs
	lost                          float64
	cancellations                 int64
	firstError, firstCulpritError string
}

func (m *measured) add(r runResult) {
	m.latencies = append(m.latencies, r.LatenciesMs...)
	m.victims += r.Victims
	m.ok += r.VictimsOK
	m.failed += r.VictimsFailed
	m.cancel += r.VictimsCancel
	m.within += r.SLOAttainment * float64(r.Victims)
	m.throughput += r.Throughput
	m.runs++
	m.sent += r.CulpritSent
	m.cok += r.CulpritOK
	m.ccancel += r.CulpritCancel
	m.ctimeout += r.CulpritTimeout
	m.cfailed += r.CulpritFailed
	m.climited += r.CulpritLimited
	m.culpritMs += r.CulpritMeanMs
	m.lost += r.WorkLost
	m.cancellations += r.Cancelled
	if m.firstError == "" {
		m.firstError = r.FirstError
	}
	if m.firstCulpritError == "" {
		m.firstCulpritError = r.CulpritError
	}
}

func (m *measured) p99() float64 { return p99(m.latencies) }

// latencies returns the run's victims' latencies; none for a nil run.
func (r *runResult) latencies() []float64 {
	if r == nil {
		return nil
	}
	return r.LatenciesMs
}

// p99 returns the 99th percentile of the latencies (0 for none).
func p99(lat []float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(0.99*float64(len(s))))-1))]
}

// mean returns the victims' mean latency, in milliseconds.
func (m *measured) mean() float64 {
	if len(m.latencies) == 0 {
		return 0
	}
	sum := 0.0
	for _, l := range m.latencies {
		sum += l
	}
	return sum / float64(len(m.latencies))
}

func (m *measured) meanThroughput() float64 {
	if m.runs == 0 {
		return 0
	}
	return m.throughput / float64(m.runs)
}

func (m *measured) row(kase, ctl string, base *measured, noCulprit bool) bench.Row {
	r := bench.Row{Suite: Suite, Case: kase, Controller: ctl, NoCulprit: noCulprit,
		P99Ms: m.p99(), Throughput: m.meanThroughput(),
		VictimMeanMs: m.mean(), VictimMeanNormalMs: base.mean(),
		CulpritsCancelled: m.ccancel, VictimsCancelled: m.cancel, Cancelled: int(m.cancellations),
		WorkLost: m.lost}
	if bp := base.p99(); bp > 0 {
		r.P99Norm = r.P99Ms / bp
	}
	if bt := base.meanThroughput(); bt > 0 {
		r.ThroughputNorm = r.Throughput / bt
	}
	if m.victims > 0 {
		r.SLOAttainment = m.within / float64(m.victims)
		r.DropRate = float64(m.failed+m.cancel) / float64(m.victims)
	}
	return r
}

// fate says what became of the culprit's queries.
func (m *measured) fate() string {
	s := fmt.Sprintf("%d sent: %d completed, %d cancelled by the controller, %d timed out, %d refused or failed; mean %.0fms; work lost %.2fs",
		m.sent, m.cok, m.ccancel, m.ctimeout, m.cfailed, m.culpritMs/float64(max(m.runs, 1)), m.lost)
	if m.firstCulpritError != "" {
		s += "; first failure: " + m.firstCulpritError
	}
	return s
}

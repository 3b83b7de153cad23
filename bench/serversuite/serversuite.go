// Package serversuite runs the suites of moirai bench on a real server
// patched for moirai (etcdsuite, promsuite): a server's reported overload,
// under no control, under moirai integrated by a patch, and under the
// remedies the server's operators have today. A suite's package says what
// it is (a [Suite]: its server, cases, controllers and parameters); this
// package runs it.
//
// The server and its load are an integration module's program
// (integrations/NAME, cmd/NAMEload): the server in process, on loopback,
// and an open-loop load on its official client. The bench module does not
// import the server: the suite builds that program twice with the
// integration module's build command (on the released server, and on its
// source from the module cache with the module's patch applied) and runs
// the builds as child processes, reading one JSON line per run. So the
// server, whose module needs a newer go than the workspace's, stays out of
// the bench module's graph.
//
// # Runs
//
// Each round starts the released build once per case (runs: the load
// without the culprit, then under none and the remedies, on one server and
// its data) and the patched build once per controller that needs it
// (moirai; etcd's oracle, which watches the patched index lock). A row pools its rounds'
// victims (their p99 is the pooled victims' p99) and compares them with
// the pooled runs without the culprit: p99_norm and throughput_norm. The
// spread is the rounds' own p99_norm, in the results' params. With
// NoCulprit every run goes without the culprit: the released build twice
// (the second is the none row: the noise between two identical runs) and
// the patched one under moirai (its cost).
package serversuite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// Suite is one suite of a patched server: what differs from another.
type Suite struct {
	// Name is the suite's name in rows and on the command line.
	Name string
	// Server names the server in messages ("etcd").
	Server string
	// ServerModule is the server's Go module the patch applies to, and
	// the results' parameter that names its version and the patch's size.
	ServerModule string
	// Module is the integration module's directory under integrations/;
	// it holds Module+".patch".
	Module string
	// Build is the integration module's build command ("./cmd/etcdbuild"):
	// given -out DIR, it prints the two builds as one JSON object.
	Build string
	// Models, Resource and Victims describe the suite's cases in bench
	// list.
	Models, Resource, Victims string
	Cases                     []Case
	Controllers               []Controller
	// DefaultDuration and DefaultWarmup are Options' when left zero.
	DefaultDuration, DefaultWarmup time.Duration
	// Size is the load program's flag of the data it loads before the
	// runs ("keys"); DefaultSize is Options.Size's default.
	Size        string
	DefaultSize int
	// Params returns the suite's own parameters in the results for
	// Options o (the server, the data, the victims' load).
	Params func(o Options) map[string]string
	// FailuresMeasured: a victim's failure is part of its row's drop rate
	// (a remedy that fails victims, as an engine's timeout, is measured,
	// not broken) and named in the params; otherwise it fails the row.
	FailuresMeasured bool
	// Failed names the culprit's failures in the params ("failed");
	// Limiter: a remedy holds some of the culprit's requests back.
	Failed  string
	Limiter bool
}

// Case is one shape of the culprit.
type Case struct {
	Name string
	// Args are the load program's flags for the case's culprit.
	Args     []string
	Describe string
}

// Controller is a way to run the server.
type Controller struct {
	Name     string
	Describe string
	// Patched: the controller runs on the patched build (moirai), in a
	// process of its own; the others are remedies of the released server,
	// run by the load.
	Patched bool
	// Oracle: the bound of a controller that acts on evidence (the load's
	// run "oracle"), which knows the culprit by construction and cancels
	// it the moment a victim first waits behind it. It acts only on the
	// culprit: without it, it is not run.
	Oracle bool
}

// Options configure Execute.
type Options struct {
	// Dir is the integration module's directory; empty: found from the
	// working directory up.
	Dir         string
	Cases       []Case
	Controllers []Controller
	Rounds      int
	Warmup      time.Duration
	Duration    time.Duration
	// Size is the data loaded before the runs (the suite's Size flag).
	Size      int
	Seed      uint64
	NoCulprit bool
	Progress  func(done, total int, what string)
}

// Select returns the cases and controllers named in the comma-separated
// lists ("all": every one).
func (s *Suite) Select(cases, controllers string) ([]Case, []Controller, error) {
	cs, err := pick(s, cases, s.Cases, func(c Case) string { return c.Name })
	if err != nil {
		return nil, nil, err
	}
	ctls, err := pick(s, controllers, s.Controllers, func(c Controller) string { return c.Name })
	return cs, ctls, err
}

func pick[T any](s *Suite, list string, all []T, name func(T) string) ([]T, error) {
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
			return nil, fmt.Errorf("suite %s: unknown %q (have %s)", s.Name, n, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// FindDir returns the integration module's directory above the working
// directory.
func (s *Suite) FindDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(d, "integrations", s.Module)
		if _, err := os.Stat(filepath.Join(p, s.Module+".patch")); err == nil {
			return p, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("suite %s: no integrations/%s/%s.patch above the working directory; run from the repository", s.Name, s.Module, s.Module)
		}
		d = up
	}
}

// Execute builds the server twice and runs every case under every
// controller, o.Rounds times, interleaved.
func (s *Suite) Execute(ctx context.Context, o Options) (*bench.Results, error) {
	o, err := s.defaults(o)
	if err != nil {
		return nil, err
	}
	res := &bench.Results{
		Suite: s.Name, Started: time.Now().UTC(), Seed: o.Seed, Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(), Params: s.Params(o),
	}
	res.Params["warm-up"] = o.Warmup.String()
	res.Params["loadavg0"] = loadavg()
	if o.Rounds > 1 {
		res.Params["rounds"] = fmt.Sprintf("%d, interleaved; round k's arrivals from seed %d+k; a row pools its rounds' victims", o.Rounds, o.Seed)
	}
	r := &runner{s: s, o: o, res: res, total: 1 + o.Rounds*len(o.Cases)*processes(o),
		pooled: map[key]*measured{}, byRound: map[key][]string{}, failed: map[key]string{}}
	r.step("building " + s.Server + ": released and patched")
	tmp, err := os.MkdirTemp("", "moirai-"+s.Module+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bins, err := s.build(ctx, o.Dir, filepath.Join(tmp, "build"))
	if err != nil {
		return nil, err
	}
	res.Params[s.Module] = fmt.Sprintf("%s %s; patch: %d lines added, %d removed", s.ServerModule, bins.Server, bins.Added, bins.Removed)
	if err := r.run(ctx, bins); err != nil {
		return res, err
	}
	res.Params["loadavg1"] = loadavg()
	r.rows()
	if o.Progress != nil {
		o.Progress(r.total, r.total, "done")
	}
	return res, nil
}

// defaults returns o with its zero fields set to the suite's defaults.
func (s *Suite) defaults(o Options) (Options, error) {
	o.Rounds = max(o.Rounds, 1)
	if o.Duration <= 0 {
		o.Duration = s.DefaultDuration
	}
	if o.Warmup <= 0 {
		o.Warmup = s.DefaultWarmup
	}
	if o.Size <= 0 {
		o.Size = s.DefaultSize
	}
	if len(o.Cases) == 0 || len(o.Controllers) == 0 {
		return o, fmt.Errorf("suite %s: no case or no controller", s.Name)
	}
	if o.Dir == "" {
		d, err := s.FindDir()
		if err != nil {
			return o, err
		}
		o.Dir = d
	}
	return o, nil
}

// key names a row: a case and a run of the load (a controller, or
// "normal": without the culprit).
type key struct{ kase, run string }

// runner is one Execute's state: the runs pooled per row.
type runner struct {
	s           *Suite
	o           Options
	res         *bench.Results
	done, total int
	pooled      map[key]*measured
	byRound     map[key][]string // the rounds' p99_norm
	failed      map[key]string   // a failed process's error
}

func (r *runner) step(what string) {
	if r.o.Progress != nil {
		r.o.Progress(r.done, r.total, what)
	}
	r.done++
}

// run runs the rounds: per case, the released build's runs, then the
// patched build's.
func (r *runner) run(ctx context.Context, bins binaries) error {
	released, patched := r.runs()
	type group struct {
		bin  string
		runs []string
	}
	groups := []group{{bins.Released, released}}
	for _, p := range patched {
		groups = append(groups, group{bins.Patched, []string{p}})
	}
	for round := range r.o.Rounds {
		seed := r.o.Seed + uint64(round)
		for _, c := range r.o.Cases {
			var base *runResult
			for _, g := range groups {
				if len(g.runs) == 0 {
					continue
				}
				what := c.Name + ": " + strings.Join(g.runs, ", ")
				if r.o.Rounds > 1 {
					what = fmt.Sprintf("round %d/%d: %s", round+1, r.o.Rounds, what)
				}
				r.step(what)
				if err := ctx.Err(); err != nil {
					return err
				}
				out, err := runLoad(ctx, g.bin, c, r.s, r.o, seed, g.runs)
				for i, run := range g.runs {
					k := key{c.Name, rowName(run, i, r.o.NoCulprit)}
					if err != nil {
						r.failed[k] = err.Error()
						continue
					}
					if i == 0 && run == "normal" {
						base = &out[i]
					}
					r.pool(k, out[i], base)
				}
			}
		}
	}
	return nil
}

// runs returns the runs of the released build, in one process, and those
// of the patched one, each in a process of its own (a controller, or the
// oracle, per server).
func (r *runner) runs() (released, patched []string) {
	for _, c := range r.o.Controllers {
		switch {
		case r.o.NoCulprit && c.Patched && !c.Oracle:
			patched = append(patched, "moirai-normal")
		case r.o.NoCulprit && c.Name == "none":
			released = append(released, "normal")
		case r.o.NoCulprit:
			// The remedies and the oracle act only on the culprit:
			// without it they are the released server.
		case c.Patched:
			patched = append(patched, c.Name)
		default:
			released = append(released, c.Name)
		}
	}
	return append([]string{"normal"}, released...), patched
}

// pool adds run rr to row k, and its p99_norm against the round's run
// without the culprit, base, to the row's spread.
func (r *runner) pool(k key, rr runResult, base *runResult) {
	if r.pooled[k] == nil {
		r.pooled[k] = &measured{}
	}
	r.pooled[k].add(rr)
	if b := p99(latencies(base)); b > 0 && k.run != "normal" {
		r.byRound[k] = append(r.byRound[k], strconv.FormatFloat(p99(rr.LatenciesMs)/b, 'f', 2, 64))
	}
}

// processes returns how many processes a round starts per case: the
// released build's and one per run of the patched build.
func processes(o Options) int {
	n := 1
	for _, c := range o.Controllers {
		if c.Patched && !(o.NoCulprit && c.Oracle) {
			n++
		}
	}
	return n
}

// rows makes the results' rows from the pooled runs.
func (r *runner) rows() {
	o, res := r.o, r.res
	for _, c := range o.Cases {
		base := r.pooled[key{c.Name, "normal"}]
		if base == nil {
			for _, ctl := range o.Controllers {
				res.Rows = append(res.Rows, bench.Row{Suite: r.s.Name, Case: c.Name, Controller: ctl.Name, NoCulprit: o.NoCulprit,
					Error: "the run without the culprit failed: " + r.failed[key{c.Name, "normal"}]})
			}
			continue
		}
		for _, ctl := range o.Controllers {
			if o.NoCulprit && ctl.Name != "none" && (!ctl.Patched || ctl.Oracle) {
				continue
			}
			k := key{c.Name, ctl.Name}
			m := r.pooled[k]
			if m == nil {
				msg := r.failed[k]
				if msg == "" {
					msg = "no run"
				}
				res.Rows = append(res.Rows, bench.Row{Suite: r.s.Name, Case: c.Name, Controller: ctl.Name, NoCulprit: o.NoCulprit, Error: msg})
				continue
			}
			row := m.row(r.s, c.Name, ctl.Name, base, o.NoCulprit)
			if none := r.pooled[key{c.Name, "none"}]; none != nil && !o.NoCulprit {
				row.VictimMeanUncontrolledMs = none.mean()
			}
			res.Rows = append(res.Rows, row)
			if o.Rounds > 1 {
				res.Params["p99_norm by round: "+c.Name+"/"+ctl.Name] = strings.Join(r.byRound[k], ", ")
			}
			if !o.NoCulprit {
				res.Params["culprit: "+c.Name+"/"+ctl.Name] = m.fate(r.s)
			}
			if r.s.FailuresMeasured && m.failed > 0 {
				res.Params["victims failed: "+c.Name+"/"+ctl.Name] = fmt.Sprintf("%d of %d; first: %s", m.failed, m.victims, m.firstError)
			}
		}
	}
}

// rowName is the row a run of the load program feeds: its run name,
// except that without the culprit the released build's second "normal" is
// the none row and the patched build's "moirai-normal" the moirai row.
func rowName(run string, i int, noCulprit bool) string {
	switch {
	case noCulprit && run == "normal" && i > 0:
		return "none"
	case run == "moirai-normal":
		return "moirai"
	}
	return run
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// List is the suite in words, for moirai bench list.
func (s *Suite) List() bench.Listing {
	l := bench.Listing{Suite: s.Name}
	for _, c := range s.Cases {
		l.Cases = append(l.Cases, bench.About{Suite: s.Name, Name: c.Name, Models: s.Models, Resource: s.Resource, Culprit: c.Describe, Victims: s.Victims})
	}
	for _, c := range s.Controllers {
		l.Controllers = append(l.Controllers, bench.Named{Name: c.Name, Describe: c.Describe})
	}
	return l
}

// Package bench is moirai's evaluation harness: the suites of cases every
// claim is measured on (catalogued in CASES.md, in this directory), the
// controllers they are run under, and the measurement of each run.
//
// # How a case is measured
//
// A [Case] builds a small service on a [moirai.Controller] using only
// moirai's public API. The harness serves it over real loopback HTTP and
// sends it light requests open-loop (Poisson arrivals at the case's rate,
// from a seeded source, so two runs with the same seed send the same
// schedule). A quarter of the way into the run (by default) it sends the
// culprit, or, with Options.Stream, starts the case's noisy client: pBox's
// shape of the culprit, shorter requests of its class sent back to back
// for half the run. Every request's {start, end, outcome} streams into a recorder;
// summaries (HDR histograms) and time series are computed once, at the end.
//
// For each case the same invocation first runs the case without its
// culprit and without control (the "normal" run), then with the culprit
// and no control ("none"), then with the culprit under each controller.
// Rows are normalized by the normal run: throughput_norm, p99_norm, and the
// victims' mean latencies that pBox's interference reduction ratio needs.
//
// # Controllers
//
// A [Controller] is a named configuration of moirai: the options of the
// moirai.Controller (policies, detectors) and an optional admission
// controller in front of the service's worker slots. The baselines a user
// would otherwise reach for are here (none, protego, codel, breakwater);
// the mechanisms of later issues register theirs with [RegisterController].
//
// # Outcomes
//
// The service answers every request with a status and a Moirai-Outcome
// header: ok (200), cancelled by the controller (503), rejected by
// admission (503), failed (500). Light requests are the victims; culprit
// requests are the culprits: a cancellation is counted as one or the other
// by the request that received it, never by guess.
package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
)

// Case is one scenario of a suite.
type Case struct {
	Suite string
	Name  string
	// Models names the paper cases it models (A: Atropos, P: pBox), or the
	// production situation it stands for.
	Models string
	// Resource, Culprit and Victims describe the case in words.
	Resource, Culprit, Victims string
	// SLO is the latency objective of the light requests (default 50 ms).
	SLO time.Duration
	// Build builds the service on env.Ctl. It is called once per run.
	Build func(env *Env) (*Service, error)
	// ProcessWide is set when the case's contended resource is the whole
	// process's (its CPU, the Go heap) rather than a value the case owns:
	// anything else running in the process uses it without the case's
	// controller seeing, so the case must run alone (moirai bench soak
	// never runs it beside another case).
	ProcessWide bool
	// LockExposure is, for a case whose culprit blocks the light requests
	// behind a lock, the share of the light requests that meet the
	// culprit's hold with more than their objective of it left to wait:
	// the requests a victim-dropping baseline (Protego) drops, and no
	// others. It is about ½ where the culprit holds its lock in one
	// stretch for half the run, the shape of the Atropos paper's lock
	// cases; 0 for the cases that are not lock cases.
	LockExposure float64
}

// Env is what a case's Build gets.
type Env struct {
	// Ctl is the run's controller: create resources on it.
	Ctl *moirai.Controller
	// Seed is the run's seed; the same for every run of an invocation.
	Seed uint64
	// Duration is the run's length.
	Duration time.Duration
	// Reexecute is set when the run's controller re-executes cancelled
	// work (see Controller.Reexecute): a case that begins tasks of its own
	// for a culprit runs them through moirai.Retry then.
	Reexecute bool
	// RetryOptions are what such a case passes to moirai.Retry: they
	// record each re-execution in the run's events, as the harness's own
	// re-executions are.
	RetryOptions []moirai.RetryOption
}

// Service is a case's service, as the harness drives it.
type Service struct {
	// Light serves the i-th light request (a victim). It returns an error
	// wrapping the context's cause when it gives up.
	Light func(ctx context.Context, i int) error
	// Culprit serves the culprit request. Tasks a case begins itself for
	// the culprit's work must have a class starting with "culprit" so that
	// their cancellation counts as a culprit's.
	Culprit func(ctx context.Context) error
	// Rate is the light requests' arrival rate per second.
	Rate float64
	// Workers bounds the requests served at once (worker slots); 0 means
	// unbounded. Requests beyond it queue; that wait is the queueing delay
	// admission controllers see.
	Workers int64
	// CulpritAt is when the culprit is sent, as a fraction of the run.
	// Zero means 0.25.
	CulpritAt float64
	// Noisy, if set, serves the i-th request of the case's noisy client:
	// the culprit's kind of work cut into requests of tens of
	// milliseconds, sent back to back (pBox's noisy connection). Runs with
	// Options.Stream send these from CulpritAt for half the run instead of
	// the one culprit request; a case without Noisy sends its culprit.
	// Noisy requests are of the culprit's class.
	Noisy func(ctx context.Context, i int) error
	// NoisyClients is how many noisy requests are in flight at once, each
	// client sending its next as soon as its last is answered (default
	// 4).
	NoisyClients int
	// Close, if set, releases what Build started.
	Close func()
}

func (c *Case) slo() time.Duration {
	if c.SLO > 0 {
		return c.SLO
	}
	return 50 * time.Millisecond
}

var (
	casesMu sync.Mutex
	cases   = map[string][]Case{}
)

// Register adds a case to its suite. It panics on a duplicate name, as
// http.Handle does: cases are registered at init time.
func Register(c Case) {
	casesMu.Lock()
	defer casesMu.Unlock()
	for _, o := range cases[c.Suite] {
		if o.Name == c.Name {
			panic(fmt.Sprintf("bench: case %s/%s registered twice", c.Suite, c.Name))
		}
	}
	cases[c.Suite] = append(cases[c.Suite], c)
}

// Suites returns the names of the suites with cases, sorted.
func Suites() []string {
	casesMu.Lock()
	defer casesMu.Unlock()
	var out []string
	for s := range cases {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Cases returns the cases of a suite in registration order.
func Cases(suite string) []Case {
	casesMu.Lock()
	defer casesMu.Unlock()
	return slices.Clone(cases[suite])
}

// ErrUnknown is wrapped by the errors of SelectCases and
// SelectControllers.
var ErrUnknown = errors.New("bench: unknown name")

// SelectCases resolves a comma-separated list of case names, or "all".
// Unknown names are an error that lists the valid ones.
func SelectCases(suite, list string) ([]Case, error) {
	all := Cases(suite)
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: suite %q (valid: %s)", ErrUnknown, suite, strings.Join(Suites(), ", "))
	}
	return SelectByName(list, "case", all, func(c Case) string { return c.Name })
}

// SelectByName resolves a comma-separated list of names among all, or
// "all" (also the empty list): what the suites' --case and --controller
// flags take. An unknown name is an error wrapping ErrUnknown that names
// what it is and lists the valid ones.
func SelectByName[T any](list, what string, all []T, name func(T) string) ([]T, error) {
	if list == "" || list == "all" {
		return all, nil
	}
	var out []T
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(x T) bool { return name(x) == n })
		if i < 0 {
			var names []string
			for _, x := range all {
				names = append(names, name(x))
			}
			return nil, fmt.Errorf("%w: %s %q (valid: %s)", ErrUnknown, what, n, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

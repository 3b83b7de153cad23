package locktopo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/moirai-go/moirai/guard"
)

// Options configure a run.
type Options struct {
	// Servers to run on (default both: Postgres and MySQL).
	Servers []string
	// PostgresDSN and MySQLDSN are an administrator's DSNs (postgres://…,
	// mysql://…): the run creates its databases and roles with them
	// (defaults: the local servers).
	PostgresDSN, MySQLDSN string
	// Scenarios per server (default 40).
	Scenarios int
	// Seed of the run: the i-th scenario's seed is ScenarioSeed(Seed, i).
	Seed uint64
	// Replay runs only these scenario seeds (on every server of Servers).
	Replay []uint64
	// SLO is the guard's objective (default 500 ms).
	SLO time.Duration
	// PostgresInterval and MySQLInterval are the guard's poll intervals
	// (default 100 ms and 250 ms).
	PostgresInterval, MySQLInterval time.Duration
	// Sequential runs the servers one after the other (default: at the
	// same time; they share nothing).
	Sequential bool
	// Progress, if set, is called after each scenario (from the server's
	// goroutine: it must be safe for concurrent use).
	Progress func(r Result, done, total int)
	// Log receives a line per wrong action or failed scenario (nil: none).
	Log io.Writer
	// Replicas of the acting guard run on each scenario (default 1), as
	// an operator runs a watchdog twice: they share the lease of the
	// scenario's database, and a session acted on more than once is a
	// double action (Result.Doubles).
	Replicas int
}

func (o *Options) defaults() {
	if len(o.Servers) == 0 {
		o.Servers = []string{Postgres, MySQL}
	}
	if o.PostgresDSN == "" {
		o.PostgresDSN = "postgres://postgres@127.0.0.1:5432/postgres"
	}
	if o.MySQLDSN == "" {
		o.MySQLDSN = "mysql://root@tcp(127.0.0.1:3306)/"
	}
	if o.Scenarios <= 0 {
		o.Scenarios = 40
	}
	if o.SLO <= 0 {
		o.SLO = 500 * time.Millisecond
	}
	if o.PostgresInterval <= 0 {
		o.PostgresInterval = 100 * time.Millisecond
	}
	if o.MySQLInterval <= 0 {
		o.MySQLInterval = 250 * time.Millisecond
	}
	o.Replicas = max(o.Replicas, 1)
}

// minInterval is the guard's default minimum interval between two
// actions: the n-th root of a scenario is due n−1 of them (and a poll
// each) later.
const minInterval = time.Second

// Action is one action the guard took (called its source's Cancel or
// Terminate for), as the scenario's ground truth classifies it.
type Action struct {
	At      time.Duration `json:"at_ns"` // from the scenario's first wait
	Verb    string        `json:"verb"`  // cancel, terminate
	Session int64         `json:"session"`
	Index   int           `json:"index"` // the scenario's session; -1: none of the scenario's
	// Wrong says why the action was wrong ("" when it acted on an
	// actionable root).
	Wrong string `json:"wrong,omitempty"`
}

// Result is one scenario's outcome.
type Result struct {
	Seed     uint64 `json:"seed"`
	Server   string `json:"server"`
	Topology string `json:"topology"`
	Scenario string `json:"scenario"` // its one-line description
	// Skipped says why the scenario was not run; BuildError why it could
	// not be built (neither is counted as run).
	Skipped    string `json:"skipped,omitempty"`
	BuildError string `json:"build_error,omitempty"`
	// Disturbed says how another client of the server disturbed the
	// scenario (see server.disturbed): it is not counted as run.
	Disturbed string `json:"disturbed,omitempty"`
	// Actionable: some contended object has only actionable roots.
	// RootActed: every root of those objects was acted on in time: the
	// first within the objective plus two polls, each further one within
	// the guard's minimum interval between actions plus a poll after the
	// one before; RootLate: acted on, but later.
	Actionable bool `json:"actionable"`
	RootActed  bool `json:"root_acted"`
	RootLate   bool `json:"root_late,omitempty"`
	// RootLatency is the last actionable root's action, from the first
	// wait.
	RootLatency time.Duration `json:"root_latency_ns,omitempty"`
	Actions     []Action      `json:"actions,omitempty"`
	Wrong       int           `json:"wrong"` // wrong actions
	// Doubles counts the sessions acted on more than once (by one
	// replica or several).
	Doubles int `json:"doubles,omitempty"`
	// Decisions are the guard's own records (reasons), for a failure's
	// report.
	Decisions []string `json:"decisions,omitempty"`
}

// Failed reports whether r is a failure: a wrong action, or an
// actionable root not acted on in time.
func (r *Result) Failed() bool {
	if r.Disturbed != "" {
		return false
	}
	return r.Wrong > 0 || r.Doubles > 0 || (r.Actionable && !r.RootActed) || r.BuildError != ""
}

// Report is a run's results.
type Report struct {
	Started time.Time
	Took    map[string]time.Duration // per server
	Results []Result
}

// Run generates and runs the scenarios on each server. It returns the
// results so far and an error when a server could not be prepared; a
// scenario that fails is a result, not an error. It cleans up (databases,
// roles, its own sessions) before returning, whatever happened.
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt.defaults()
	rep := &Report{Started: time.Now(), Took: map[string]time.Duration{}}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, name := range opt.Servers {
		run := func() {
			start := time.Now()
			rs, err := runServer(ctx, &opt, name)
			mu.Lock()
			defer mu.Unlock()
			rep.Took[name] = time.Since(start)
			rep.Results = append(rep.Results, rs...)
			if err != nil {
				errs = append(errs, fmt.Errorf("locktopo: %s: %w", name, err))
			}
		}
		if opt.Sequential {
			run()
		} else {
			wg.Go(run)
		}
	}
	wg.Wait()
	slices.SortStableFunc(rep.Results, func(a, b Result) int {
		if a.Server != b.Server {
			return cmpStr(a.Server, b.Server)
		}
		return 0
	})
	return rep, errors.Join(errs...)
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runServer runs one server's scenarios.
func runServer(ctx context.Context, opt *Options, name string) ([]Result, error) {
	var srv server
	switch name {
	case Postgres:
		srv = &pgServer{admin: opt.PostgresDSN, interval: opt.PostgresInterval}
	case MySQL:
		srv = &myServer{admin: opt.MySQLDSN, interval: opt.MySQLInterval}
	default:
		return nil, fmt.Errorf("unknown server %q (want %s or %s)", name, Postgres, MySQL)
	}
	if err := srv.setup(ctx); err != nil {
		srv.teardown()
		return nil, err
	}
	defer srv.teardown()
	seeds := opt.Replay
	if len(seeds) == 0 {
		for i := range opt.Scenarios {
			seeds = append(seeds, ScenarioSeed(opt.Seed, i))
		}
	}
	var out []Result
	for i, seed := range seeds {
		if ctx.Err() != nil {
			return out, context.Cause(ctx)
		}
		sc := Generate(name, seed)
		r := runScenario(ctx, opt, srv, sc)
		out = append(out, r)
		if opt.Log != nil && r.Disturbed != "" {
			fmt.Fprintf(opt.Log, "locktopo: disturbed %s: %s (not counted; --replay %d --servers %s)\n", r.Scenario, r.Disturbed, r.Seed, r.Server)
		}
		if opt.Log != nil && r.Failed() {
			fmt.Fprintf(opt.Log, "locktopo: FAILED %s (replay: --replay %d --servers %s)\n", r.Scenario, r.Seed, r.Server)
			if r.BuildError != "" {
				fmt.Fprintf(opt.Log, "  build: %s\n", r.BuildError)
			}
			if r.Actionable && !r.RootActed {
				fmt.Fprintf(opt.Log, "  actionable root not acted on in time (late: %v)\n", r.RootLate)
			}
			for _, a := range r.Actions {
				fmt.Fprintf(opt.Log, "  %v %s session %d (s%d): %s\n", a.At.Round(time.Millisecond), a.Verb, a.Session, a.Index, orRight(a.Wrong))
			}
			for _, d := range r.Decisions {
				fmt.Fprintf(opt.Log, "  guard: %s\n", d)
			}
		}
		if opt.Progress != nil {
			opt.Progress(r, i+1, len(seeds))
		}
	}
	return out, nil
}

func orRight(w string) string {
	if w == "" {
		return "right (an actionable root)"
	}
	return "WRONG: " + w
}

// server is one database server as the runner drives it.
type server interface {
	// setup creates the run's databases and roles; teardown drops them
	// and ends every session the run opened.
	setup(ctx context.Context) error
	teardown()
	// prepare (re)creates the scenario's tables.
	prepare(ctx context.Context, sc *Scenario) error
	// open opens the session s of a scenario.
	open(ctx context.Context, s Session) (conn, error)
	// waiting returns which of ids wait for a lock now.
	waiting(ctx context.Context, ids []int64) (map[int64]bool, error)
	// disturbed says how sessions other than mine disturb a scenario,
	// "" if they don't: on MariaDB, another client's global read lock
	// (FTWRL, a backup) stalls the scenario's statements, and another
	// client's writes queue behind the scenario's FTWRL, which makes its
	// chain cross the guard's scope. The scenario's ground truth no longer
	// holds then: it is counted apart, not checked.
	disturbed(ctx context.Context, mine []int64) string
	// describe says what the server shows of sessions ids (for a
	// scenario that could not be built).
	describe(ctx context.Context, ids []int64) string
	// kill ends the sessions ids (the run's own only).
	kill(ids []int64)
	// source opens the guard's source for sc, scoped to the scope
	// database.
	source(ctx context.Context, sc *Scenario) (guard.Source, error)
	protection() guard.Protection
	pollInterval() time.Duration
	// expand replaces the tokens of a statement (the scope database).
	expand(q string) string
}

// conn is one client session.
type conn interface {
	id() int64
	exec(ctx context.Context, q string) error
	close()
}

// scenarioTimeout bounds one scenario, set-up and clean-up included.
const scenarioTimeout = 60 * time.Second

// runScenario builds sc on srv, runs an acting guard on it, and checks
// what the guard did against the ground truth. It ends every session it
// opened before returning.
func runScenario(ctx context.Context, opt *Options, srv server, sc *Scenario) (res Result) {
	res = Result{Seed: sc.Seed, Server: sc.Server, Topology: sc.Topology, Scenario: sc.String()}
	if sc.Skip != "" {
		res.Skipped = sc.Skip
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	if err := srv.prepare(ctx, sc); err != nil {
		res.BuildError = "prepare: " + err.Error()
		return res
	}
	conns := make([]conn, len(sc.Sessions))
	ids := map[int64]int{}
	var all []int64
	var wg sync.WaitGroup
	actx, acancel := context.WithCancel(ctx) // the statements left running
	defer func() {
		// Only the scenario's own sessions are ended; a statement left
		// running returns once its session is gone (or its context ends).
		srv.kill(all)
		acancel()
		wg.Wait()
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	for i, s := range sc.Sessions {
		c, err := srv.open(ctx, s)
		if err != nil {
			res.BuildError = fmt.Sprintf("open s%d: %v", i, err)
			return res
		}
		conns[i] = c
		ids[c.id()] = i
		all = append(all, c.id())
	}

	// The guard (each replica of it), acting, through a source that
	// records every action and carries out only those on the scenario's
	// own sessions.
	acts := &actions{}
	var recs []*recorder
	var gs []*guard.Guard
	closeAll := func() {
		for _, r := range recs {
			r.Close()
		}
	}
	for range opt.Replicas {
		inner, err := srv.source(ctx, sc)
		if err != nil {
			closeAll()
			res.BuildError = "guard source: " + err.Error()
			return res
		}
		rec := &recorder{Source: inner, mine: ids, acts: acts}
		recs = append(recs, rec)
		if _, err := rec.Check(ctx); err != nil {
			closeAll()
			res.BuildError = "guard check: " + err.Error()
			return res
		}
		g, err := guard.New(rec, guardOptions(srv, opt, sc))
		if err != nil {
			closeAll()
			res.BuildError = "guard: " + err.Error()
			return res
		}
		gs = append(gs, g)
	}
	rec := recs[0] // the actions of every replica
	gctx, stopGuard := context.WithCancel(ctx)
	var gwg sync.WaitGroup
	for _, g := range gs {
		gwg.Go(func() { _ = g.Run(gctx) })
	}
	stop := func() {
		stopGuard()
		gwg.Wait()
		closeAll()
	}
	defer func() {
		if stopGuard != nil {
			stop()
		}
	}()

	// Build the scenario, step by step.
	var t0 time.Time
	var waiters []int64
	var ended sync.Map // session id → how its statement ended before the scenario did
	for _, st := range sc.Steps {
		c := conns[st.Sess]
		for _, q := range st.Sync {
			if err := c.exec(ctx, srv.expand(q)); err != nil {
				res.BuildError = fmt.Sprintf("s%d %q: %v", st.Sess, q, err)
				return res
			}
		}
		if st.Async == "" {
			continue
		}
		if st.Wait && t0.IsZero() {
			t0 = time.Now()
		}
		q, after, sess := srv.expand(st.Async), st.After, st.Sess
		wg.Go(func() {
			if err := c.exec(actx, q); actx.Err() == nil {
				ended.Store(c.id(), fmt.Sprintf("s%d's %q returned early: %v", sess, q, err))
			}
			fctx, fcancel := context.WithTimeout(context.WithoutCancel(actx), 2*time.Second)
			defer fcancel()
			for _, a := range after {
				_ = c.exec(fctx, a)
			}
		})
		switch {
		case st.Wait:
			waiters = append(waiters, c.id())
			if queuesBehind(sc, st) {
				if err := untilWaiting(ctx, srv, []int64{c.id()}); err != nil {
					res.BuildError = fmt.Sprintf("s%d: %v", st.Sess, err)
					return res
				}
			}
		default:
			// A holder's statement (a sleep, a long UPDATE): give it time
			// to start before anything queues behind it.
			time.Sleep(150 * time.Millisecond)
		}
	}
	if err := untilWaiting(ctx, srv, waiters); err != nil && rec.count() == 0 {
		res.BuildError = err.Error()
		ended.Range(func(_, v any) bool {
			res.BuildError += "; " + v.(string)
			return true
		})
		res.BuildError += "; the server shows: " + srv.describe(ctx, waiters)
		if d := srv.disturbed(ctx, all); d != "" {
			res.BuildError, res.Disturbed = "", d
		}
		return res
	}

	// Watch the guard until the scenario's window ends.
	roots := 0
	for i := range sc.Sessions {
		if sc.Actionable(i) {
			roots++
		}
	}
	poll := srv.pollInterval()
	// The first root within the objective plus two polls; each further
	// one within the guard's minimum interval between actions plus a poll
	// after the one before (the guard acts only at a poll).
	deadline := opt.SLO + 2*poll + time.Duration(max(roots-1, 0))*(minInterval+poll)
	end := deadline + 1500*time.Millisecond
	objs := sc.ActionableObjects()
	res.Actionable = len(objs) > 0
	onlyActionable := len(objs) == len(sc.Objects())
	for tick := 0; ; tick++ {
		now := time.Since(t0)
		if now >= end {
			break
		}
		if tick%5 == 0 && res.Disturbed == "" {
			res.Disturbed = srv.disturbed(ctx, all)
		}
		if onlyActionable {
			if last, ok := rootsActed(sc, rec.snapshot(), ids, t0); ok && now >= last+2*poll+300*time.Millisecond {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	stopGuard = nil

	if res.Disturbed == "" {
		res.Disturbed = srv.disturbed(ctx, all)
	}
	// Check.
	done := rec.snapshot()
	perSession := map[int64]int{}
	for _, a := range done {
		if perSession[a.session]++; perSession[a.session] == 2 {
			res.Doubles++
		}
	}
	for _, a := range done {
		i, mine := ids[a.session]
		act := Action{At: a.at.Sub(t0), Verb: a.verb, Session: a.session, Index: -1}
		if mine {
			act.Index = i
		}
		act.Wrong = wrongness(sc, i, mine)
		if act.Wrong != "" {
			res.Wrong++
		}
		res.Actions = append(res.Actions, act)
	}
	if res.Actionable {
		last, ok := rootsActed(sc, done, ids, t0)
		if ok {
			res.RootLatency = last
			res.RootActed = last <= deadline
			res.RootLate = !res.RootActed
		}
	}
	if res.Failed() {
		skipped := map[string]bool{}
		for _, d := range slices.Concat(func() (all [][]guard.Decision) {
			for _, g := range gs {
				all = append(all, g.Decisions())
			}
			return all
		}()...) {
			if k := fmt.Sprint(d.Target.Session, d.Note); d.Outcome == guard.OutcomeSkipped {
				if skipped[k] {
					continue // the same skip again, a poll later
				}
				skipped[k] = true
			}
			res.Decisions = append(res.Decisions, fmt.Sprintf("%s %s session %d: %s (%s) %s", d.Outcome, d.Action, d.Target.Session, d.Reason, d.Note, d.Time.Format("15:04:05.000")))
		}
	}
	return res
}

// queuesBehind reports whether later steps of sc must queue behind st's
// wait (an ALTER or FTWRL that later statements wait for), so the runner
// waits for st to wait before going on.
func queuesBehind(sc *Scenario, st Step) bool {
	return sc.Topology == TopoDDLQueue || sc.Topology == TopoDDLNoPlugin || sc.Topology == TopoFTWRL
}

// untilWaiting waits until each of ids has been seen waiting for a lock
// (at most 10 s: a loaded machine is slow to start them).
func untilWaiting(ctx context.Context, srv server, ids []int64) error {
	seen := map[int64]bool{}
	limit := time.Now().Add(10 * time.Second)
	for {
		w, err := srv.waiting(ctx, ids)
		if err != nil {
			return err
		}
		for id := range w {
			seen[id] = true
		}
		var missing []int64
		for _, id := range ids {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(limit) {
			return fmt.Errorf("sessions %v never waited", missing)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// gone polls left (how many of a scenario's ended sessions the server
// still shows) every 20 ms until it says none, fails, or ctx ends.
func gone(ctx context.Context, left func(context.Context) (int, error)) {
	for {
		if n, err := left(ctx); err != nil || n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rootsActed returns when the last actionable root of the actionable
// objects was acted on (from t0, the first wait), and whether all were.
func rootsActed(sc *Scenario, acts []recorded, ids map[int64]int, t0 time.Time) (time.Duration, bool) {
	need := map[int]bool{}
	objs := sc.Objects()
	for _, o := range sc.ActionableObjects() {
		for _, r := range objs[o] {
			need[r] = true
		}
	}
	if len(need) == 0 {
		return 0, false
	}
	var last time.Duration
	for _, a := range acts {
		if i, ok := ids[a.session]; ok && need[i] {
			delete(need, i)
			last = max(last, a.at.Sub(t0))
		}
	}
	return last, len(need) == 0
}

// wrongness says why an action on session i (mine: one of the
// scenario's) is wrong, or "" if it acted on an actionable root.
func wrongness(sc *Scenario, i int, mine bool) string {
	if !mine {
		return "a session outside the scenario (outside the scope)"
	}
	s := sc.Sessions[i]
	switch s.Role {
	case RoleWaiter:
		return "a waiting session"
	case RoleBystander:
		return "a holder nobody waits for"
	}
	if sc.Actionable(i) {
		return ""
	}
	if sc.ambiguous(i) {
		return "one of several possible holders of a metadata lock the guard had to infer (no view)"
	}
	switch s.Kind {
	case RootIdle:
		return "a root idle in transaction (terminate-idle off)"
	case RootProtUser:
		return "a root of a protected user"
	case RootProtApp:
		return "a root of a protected application"
	case RootSuperuser:
		return "a superuser root"
	case RootOtherDB:
		return "a root in another database (outside the scope)"
	}
	return "a root that is not actionable"
}

// guardOptions are the acting guard's options for sc.
func guardOptions(srv server, opt *Options, sc *Scenario) guard.Options {
	return guard.Options{
		Interval:      srv.pollInterval(),
		SLO:           opt.SLO,
		Protect:       srv.protection(),
		TerminateIdle: sc.TerminateIdle,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// recorded is one action the guard asked its source for.
type recorded struct {
	at      time.Time
	verb    string
	session int64
}

// recorder is the guard's source as the runner gives it: it records every
// Cancel and Terminate, and carries out only those on the scenario's own
// sessions (any other is refused with an error and counted as wrong).
type recorder struct {
	guard.Source
	mine map[int64]int
	acts *actions // shared by the replicas of a scenario
}

// actions are the actions the guard's replicas asked for.
type actions struct {
	mu   sync.Mutex
	acts []recorded
}

func (r *recorder) record(verb string, t guard.Target) bool {
	r.acts.mu.Lock()
	defer r.acts.mu.Unlock()
	r.acts.acts = append(r.acts.acts, recorded{at: time.Now(), verb: verb, session: t.Session})
	_, ok := r.mine[t.Session]
	return ok
}

// Lease forwards the inner source's lease (guard.Leaser), so that the
// replicas of a scenario share one, as they would on a server.
func (r *recorder) Lease(ctx context.Context, name string) (bool, error) {
	l, ok := r.Source.(guard.Leaser)
	if !ok {
		return false, errors.New("locktopo: the source takes no lease")
	}
	return l.Lease(ctx, name)
}

// Release forwards the inner source's Release.
func (r *recorder) Release(ctx context.Context) error {
	if l, ok := r.Source.(guard.Leaser); ok {
		return l.Release(ctx)
	}
	return nil
}

// errNotMine is returned for an action on a session the scenario did not
// open: the recorder never carries it out.
var errNotMine = errors.New("locktopo: refused: not a session of this scenario")

func (r *recorder) Cancel(ctx context.Context, t guard.Target) error {
	if !r.record("cancel", t) {
		return errNotMine
	}
	return r.Source.Cancel(ctx, t)
}

func (r *recorder) Terminate(ctx context.Context, t guard.Target) error {
	if !r.record("terminate", t) {
		return errNotMine
	}
	return r.Source.Terminate(ctx, t)
}

func (r *recorder) count() int {
	r.acts.mu.Lock()
	defer r.acts.mu.Unlock()
	return len(r.acts.acts)
}

// snapshot returns the actions so far.
func (r *recorder) snapshot() []recorded {
	r.acts.mu.Lock()
	defer r.acts.mu.Unlock()
	return slices.Clone(r.acts.acts)
}

// Database forwards the inner source's database (guard.Scoped), so the
// guard's scope is the DSN's, as with the command line. A source that
// names none gives "", on which guard.New fails rather than act
// everywhere.
func (r *recorder) Database() string {
	if s, ok := r.Source.(interface{ Database() string }); ok { // guard.Scoped
		return s.Database()
	}
	return ""
}

package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/snapshot"
)

// Scoped is implemented by sources that know the database they connected
// to (the DSN's): the guard's scope by default (see Options.Database).
type Scoped interface {
	Database() string
}

// Guard polls a server and cancels the statement that monopolizes a
// contended resource, with the library's Atropos policy.
type Guard struct {
	src       Source
	opt       Options
	b         *Builder
	policy    *cancel.Atropos
	durations *estimate.Durations // the statements' typical durations, by fingerprint
	audit     *slog.Logger

	mu        sync.Mutex // guards what Decisions and Last read
	decisions []Decision
	last      *snapshot.Snapshot
	lastObs   *Observation

	// The rate limits run on the guard's own monotonic clock (time since
	// start), never on the server's wall clock, which may step.
	start      time.Time
	acted      bool
	lastAction time.Duration
	actions    []time.Duration // in the last minute
	alert      bool            // the last poll saw a session wait: poll at AlertInterval
	m          *metrics

	scope     string           // the database acted in; "" with AllDatabases
	reported  map[string]bool  // the chains left alone and reported, by root task and resource
	standby   map[uint64]bool  // the tasks a standby reported it would act on
	cross     map[int64]string // roots of chains crossing the scope, of poll crossPoll
	crossPoll uint64

	recorder *slog.Logger         // Options.Record (and the audit with AuditPolls)
	clock    func() time.Duration // the rate limits' clock: time since start, or a replay's

	leaser    Leaser // nil: no lease (dry run, NoLease, or a source without one)
	lease     string
	role      string // Role*; written by the polling goroutine under mu
	roleSince time.Time

	// The state a health check reads (under mu).
	lastPoll        time.Time
	lastErr         string
	polls, failures uint64
	reloads         uint64
	reloadErr       string
	pending         *Options // applied at the start of the next Step
	stop            chan struct{}
	stopOnce        sync.Once
}

// minContention is the policy's contention threshold in the guard: one
// waiter among up to a hundred running sessions.
const minContention = 0.01

// New returns a guard of src. It does not poll until Run or Step.
func New(src Source, opt Options) (*Guard, error) {
	if src == nil {
		return nil, errors.New("guard: no source")
	}
	opt.defaults()
	g := &Guard{src: src, opt: opt, b: newBuilder(max(2*opt.Interval, 500*time.Millisecond)), start: time.Now(),
		reported: map[string]bool{}, standby: map[uint64]bool{}, stop: make(chan struct{})}
	var err error
	if g.scope, err = scopeOf(src, opt); err != nil {
		return nil, err
	}
	g.b.Cancellable = g.cancellable
	g.durations = estimate.NewDurations(0)
	g.configure()
	g.setRole()
	if g.role == RoleSolo && !opt.NoLease {
		g.opt.Logger.Warn("guard: the source takes no lease: replicas of this guard would both act", "source", src.Name())
	}
	g.clock = func() time.Duration { return time.Since(g.start) }
	if opt.Audit != nil {
		g.audit = slog.New(escapingHandler{slog.NewJSONHandler(opt.Audit, nil)})
	}
	switch {
	case opt.Record != nil:
		g.recorder = slog.New(escapingHandler{slog.NewJSONHandler(opt.Record, nil)})
	case opt.AuditPolls && g.audit != nil:
		g.recorder = g.audit
	}
	if opt.Registerer != nil {
		m, err := newMetrics(opt.Registerer, src.Name())
		if err != nil {
			return nil, err
		}
		g.m = m
	}
	return g, nil
}

// scopeOf is the database a guard of src with opt acts in ("" for every
// one).
func scopeOf(src Source, opt Options) (string, error) {
	if opt.AllDatabases {
		return "", nil
	}
	if opt.Database != "" {
		return opt.Database, nil
	}
	sc, ok := src.(Scoped)
	if !ok {
		// Fail closed: a source that does not say where it connected (a
		// wrapper) would otherwise act everywhere.
		return "", fmt.Errorf("guard: source %s does not say which database it guards (guard.Scoped): set Options.Database, or Options.AllDatabases to act in every database", src.Name())
	}
	if db := sc.Database(); db != "" {
		return db, nil
	}
	return "", errors.New("guard: the DSN names no database to guard: name one, or act in every database (--all-databases)")
}

// configure builds the policy from g.opt (at New and at each reload: a
// reload starts the policy's confirmations afresh, and keeps the learnt
// durations and the snapshots' history).
func (g *Guard) configure() {
	opt := g.opt
	g.b.MinRun = opt.SLO
	g.policy = cancel.NewAtropos(cancel.MultiObjective,
		cancel.WithDurations(g.durations),
		cancel.WithContentionWindow(2*opt.Interval),
		// The guard's trigger is the objective (looking): a session that
		// waited it, or will. The policy's level D_r/T_exec divides one
		// waiter's wait by every session's execution, so on a busy server
		// (or with hot rows, each row's queue split between its
		// transaction and tuple locks) no lock would reach the library's
		// default tenth and a root would never be chosen: a hundredth.
		cancel.WithMinContention(minContention),
		// The same choice on two consecutive polls: a culprit is chosen
		// while something waits, when the guard polls at AlertInterval
		// (polls drift by a few milliseconds: a whole interval would often
		// take three).
		cancel.WithConfirmation(opt.AlertInterval/2),
		cancel.WithMinGain(opt.SLO/2))
}

// setRole sets the guard's lease and role from g.opt.
func (g *Guard) setRole() {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.role
	g.leaser, g.lease = nil, ""
	l, ok := g.src.(Leaser)
	switch {
	case g.opt.DryRun:
		g.role = RoleDryRun
	case ok && !g.opt.NoLease:
		g.leaser, g.lease = l, leaseName(g.opt, g.scope)
		if was != RoleActive {
			g.role = RoleStandby // until the first poll takes the lease
		}
	default:
		g.role = RoleSolo
	}
	if g.role != was {
		g.roleSince = time.Now()
	}
}

// cancellable is who the policy may choose: ordinary, unprotected client
// sessions of the scope running a statement, or idle in transaction when
// terminating those is allowed, and rooting no chain that crosses the
// scope.
func (g *Guard) cancellable(s *Session) bool {
	code, _ := g.blocker(s)
	return code == ""
}

// blocker says why s cannot be acted on ("" when it can), as a Blocked*
// code and in words.
func (g *Guard) blocker(s *Session) (code, why string) {
	if p, w := g.opt.Protect.Protects(s); p {
		switch {
		case s.Superuser && !s.Own:
			return BlockedSuperuser, w
		case s.Kind != "client" && !s.Own:
			return BlockedServer, w
		}
		return BlockedProtected, w
	}
	if g.scope != "" && s.Database != g.scope {
		return BlockedScope, fmt.Sprintf("in database %q, outside the guard's scope %q (--all-databases widens it)", s.Database, g.scope)
	}
	if why, ok := g.crossing()[s.ID]; ok {
		return BlockedScope, why
	}
	switch {
	case s.Active:
		return "", ""
	case s.IdleInTransaction && g.opt.TerminateIdle:
		return "", ""
	case s.IdleInTransaction:
		return BlockedIdle, "idle in transaction: a statement cancel cannot reach it and terminating is not enabled (--terminate-idle)"
	}
	return BlockedNotRunning, "it runs no statement and holds no transaction the guard could end (a lock kept between statements)"
}

// Scope returns the database the guard acts in ("" for every one).
func (g *Guard) Scope() string { return g.scope }

// Options returns the options g runs with, defaults filled in.
func (g *Guard) Options() Options { return g.opt }

// Run polls every Interval, or every AlertInterval while the last poll saw
// a session wait for a lock, until ctx is done. A failed poll is logged and
// counted; the guard goes on. It returns ctx's error's cause when ctx
// ends, after any action in progress has returned (ctx's end aborts the
// poll in progress); and nil after Stop, once the poll in progress and its
// actions are done.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		started := time.Now()
		if _, err := g.Step(ctx); err != nil && ctx.Err() == nil {
			g.opt.Logger.Warn("guard: poll failed", "source", g.src.Name(), "err", err)
		}
		// The next poll is due an interval after this one started (a slow
		// poll delays none but itself), and never sooner than now.
		t.Reset(max(0, time.Until(started.Add(g.nextInterval()))))
		select {
		case <-g.stop: // before a poll that is due already
			return nil
		default:
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-g.stop:
			return nil
		case <-t.C:
		}
	}
}

// nextInterval is the time from the start of the last poll to the next:
// Interval, or AlertInterval while a session waits, but long enough after
// the last poll's end for views the server refreshes at most every
// Observation.Refresh to be fresh (with a tenth of that to spare).
func (g *Guard) nextInterval() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	iv := g.opt.Interval
	if g.alert {
		iv = g.opt.AlertInterval
	}
	if o := g.lastObs; o != nil && o.Refresh > 0 {
		iv = max(iv, o.Refresh+o.Refresh/10+max(0, o.Took))
	}
	return iv
}

// Step polls once, decides, and acts (or records, in a dry run). It
// returns the decisions taken in this step.
func (g *Guard) Step(ctx context.Context) (ds []Decision, err error) {
	g.applyPending()
	g.checkLease(ctx)
	obs, err := g.poll(ctx)
	if err != nil {
		g.m.pollFailed()
		g.mu.Lock()
		g.alert = false // a server that fails polls is not polled faster
		g.failures++
		g.lastErr = Escape(err.Error())
		g.mu.Unlock()
		return nil, err
	}
	g.mu.Lock()
	g.polls++
	g.lastPoll, g.lastErr = time.Now(), ""
	g.mu.Unlock()
	g.recordPoll(obs)
	snap, ignored := g.b.Build(obs)
	g.m.polled(obs, snap, ignored)
	g.policy.Observe(snap)
	// A loss of throughput alone does not speed polling up: loads swing
	// by a fifth from one span to the next, and a loss is acted on only
	// once it lasted the objective.
	alert := contended(snap)
	g.mu.Lock()
	g.last, g.lastObs, g.alert = snap, obs, alert
	g.mu.Unlock()
	if !g.looking(snap) {
		return nil, nil
	}
	ds = g.reportChains(snap, obs)
	if !g.policy.Confirm(snap) {
		return ds, nil
	}
	for _, d := range g.policy.Decide(snap) {
		if d, ok := g.act(ctx, obs, d.Task, d.Reason, d.Details); ok {
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// crossing returns, for the last Build, the roots of chains with a waiter
// outside the scope, and why (computed once per poll).
func (g *Guard) crossing() map[int64]string {
	if g.crossPoll == g.b.poll && g.cross != nil {
		return g.cross
	}
	g.crossPoll, g.cross = g.b.poll, map[int64]string{}
	if g.scope == "" {
		return g.cross
	}
	for _, c := range g.b.chains {
		if _, done := g.cross[c.Root]; done || c.Root == 0 {
			continue
		}
		for _, w := range c.Waiters {
			if ws := g.b.sessions[w]; ws != nil && ws.Database != g.scope {
				g.cross[c.Root] = fmt.Sprintf("its chain on %s crosses into database %q, outside the guard's scope %q", Escape(c.Resource), ws.Database, g.scope)
				break
			}
		}
	}
	return g.cross
}

// touches reports whether the chain has a session in the guard's scope:
// a chain wholly in another database is none of its business; one that
// crosses the scope is reported, and not acted on.
func (g *Guard) touches(c Chain) bool {
	if g.scope == "" {
		return true
	}
	for _, id := range append([]int64{c.Root}, c.Waiters...) {
		if s := g.b.sessions[id]; s != nil && s.Database == g.scope {
			return true
		}
	}
	return false
}

// reportChains records a no-action decision, once per chain, for every
// chain of the last Build whose root cannot be acted on and one of whose
// waiters has waited the objective. The policy never chooses a waiter,
// so nothing in such a chain is acted on; this says why.
func (g *Guard) reportChains(snap *snapshot.Snapshot, obs *Observation) (ds []Decision) {
	waited := map[int64]time.Duration{}
	for i := range snap.Usage {
		if u := &snap.Usage[i]; u.Waiting > 0 {
			if t, _, ok := g.b.Target(snap.Tasks[u.Task].ID); ok {
				waited[t.Session] = max(waited[t.Session], u.Wait)
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range g.b.chains {
		long := false
		for _, w := range c.Waiters {
			long = long || waited[w] >= g.opt.SLO
		}
		if !long || !g.touches(c) {
			continue
		}
		code, why := BlockedNoRoot, c.Why
		rs := g.b.sessions[c.Root]
		key := c.Resource + "\x00" + strconv.FormatInt(c.Root, 10)
		if c.Root != 0 {
			if rs == nil {
				continue
			}
			if code, why = g.blocker(rs); code == "" {
				continue
			}
			key += "\x00" + startOf(rs).String()
		}
		seen[key] = true
		if g.reported[key] {
			continue
		}
		g.reported[key] = true
		d := Decision{Time: obs.At, Action: "none", Outcome: OutcomeNoAction, Root: c.Root, Resource: c.Resource,
			Waiters: c.Waiters, Blocked: code, Inferred: c.Inferred,
			Note: "no action on the chain: its root cannot be acted on: " + why}
		if c.Root == 0 {
			d.Note = "no action on the chain: no root named: " + why
		} else {
			d.Target = Target{Session: rs.ID, Statement: rs.Statement, QueryStart: rs.QueryStart, XactStart: rs.XactStart, Query: rs.Query}
			d.User, d.App = rs.User, rs.Application
		}
		d.Reason = fmt.Sprintf("%d session(s) wait for %s behind session %d", len(c.Waiters), Escape(c.Resource), c.Root)
		g.m.notActed(code)
		ds = append(ds, g.record(d))
	}
	for k := range g.reported {
		if !seen[k] {
			delete(g.reported, k)
		}
	}
	return ds
}

// poll calls the source, turning a panic into an error.
func (g *Guard) poll(ctx context.Context) (obs *Observation, err error) {
	defer func() {
		if r := recover(); r != nil {
			obs, err = nil, fmt.Errorf("guard: %s source panicked while polling: %v", g.src.Name(), r)
		}
	}()
	obs, err = g.src.Poll(ctx)
	if err == nil && obs == nil {
		err = fmt.Errorf("guard: %s source returned no observation", g.src.Name())
	}
	return obs, err
}

// looking reports whether the guard should look for a culprit: a session
// waiting for a lock has waited for the SLO, or will have by the time the
// lock's holders are expected to let go (their age over their expected
// progress, as the library's SLO detector predicts a queued request's
// latency); or the server has been losing throughput for the SLO (see
// ServerResource). Whether a resource is contended enough to act is the
// policy's call.
func (g *Guard) looking(s *snapshot.Snapshot) bool {
	if loss, lasting := g.b.Loss(); loss > 0 && lasting >= g.opt.SLO {
		return true
	}
	var remain []time.Duration
	for i := range s.Usage {
		u := &s.Usage[i]
		if u.Waiting <= 0 {
			continue
		}
		if u.Wait >= g.opt.SLO {
			return true
		}
		if remain == nil {
			remain = g.remainingHolds(s)
		}
		if u.Res >= 0 && int(u.Res) < len(remain) && u.Wait+remain[u.Res] >= g.opt.SLO {
			return true
		}
	}
	return false
}

// contended reports whether a session of s waits for a resource.
func contended(s *snapshot.Snapshot) bool {
	for i := range s.Usage {
		if s.Usage[i].Waiting > 0 {
			return true
		}
	}
	return false
}

// remainingHolds returns, per resource of s, how long its holders are
// expected to keep it: the longest of their future usages age·(1−p)/p.
func (g *Guard) remainingHolds(s *snapshot.Snapshot) []time.Duration {
	remain := make([]time.Duration, len(s.Resources))
	for i := range s.Usage {
		u := &s.Usage[i]
		if u.Held <= 0 || u.Res < 0 || int(u.Res) >= len(remain) || u.Task < 0 || int(u.Task) >= len(s.Tasks) {
			continue
		}
		t := &s.Tasks[u.Task]
		p, _ := estimate.Progress(t, g.durations)
		remain[u.Res] = max(remain[u.Res], time.Duration(estimate.Future(float64(t.Age), p)))
	}
	return remain
}

// Decisions returns the recent decisions, oldest first.
func (g *Guard) Decisions() []Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Decision(nil), g.decisions...)
}

// Evaluate returns the policy's full reasoning on the last poll, and that
// poll's observation (nil before the first).
func (g *Guard) Evaluate() (cancel.Evaluation, *Observation) {
	g.mu.Lock()
	s, obs := g.last, g.lastObs
	g.mu.Unlock()
	if s == nil {
		return cancel.Evaluation{Chosen: -1, Reason: "no poll yet"}, nil
	}
	return g.policy.Evaluate(s), obs
}

// Builder returns the guard's snapshot builder (to map a task of an
// Evaluation to its session).
func (g *Guard) Builder() *Builder { return g.b }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

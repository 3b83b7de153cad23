package guard

import (
	"slices"
	"sort"
	"time"

	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// A task, from the outside of a server, is a session's transaction, or
// its statement when it runs outside one: what holds the locks. Its
// identity survives the polls for as long as the session runs the same
// transaction (the same xact_start / trx_started) or statement.
type taskKey struct {
	session   int64
	xact      time.Time // zero outside a transaction
	query     time.Time // when xact is zero and the source names no statement
	statement int64     // when xact is zero (MariaDB QUERY_ID)
}

// keyOf is s's task. A statement the source names (MariaDB's QUERY_ID,
// unique for the server's life) is known by its name alone: its start is
// derived from the server's clock minus the statement's age, both read
// while the view's row is filled, and moves by a fraction of a millisecond
// from one poll to the next, which would make every poll see a new task
// and no decision ever confirmed.
func keyOf(s *Session) taskKey {
	switch {
	case !s.XactStart.IsZero():
		return taskKey{session: s.ID, xact: s.XactStart}
	case s.Statement != 0:
		return taskKey{session: s.ID, statement: s.Statement}
	}
	return taskKey{session: s.ID, query: s.QueryStart}
}

// tracked is what the builder remembers of a task between polls.
type tracked struct {
	id        uint64
	class     string // the fingerprint of its first statement seen
	first     time.Time
	lastSeen  uint64 // poll number
	cancelled bool   // the guard acted on it
	uses      map[string]*useAcc
	// The transaction start and statement its session was last seen
	// with (zero: none seen): a task whose key changes as a view shows
	// its transaction on one poll and not on the next (MariaDB's
	// INNODB_TRX) goes on while either is the same (see continues).
	xact      time.Time
	statement int64
}

// continues reports whether session s, seen under another key than t's,
// still runs t: the same statement (a source that names statements), or
// the same transaction. MariaDB's INNODB_TRX does not list every
// transaction on every poll (a read-only one comes and goes), so a key
// by transaction on one poll and by statement on the next is one task:
// otherwise the task would end on each flip, its class be learned from
// its few milliseconds of use, and a holder of that class judged by them.
func (t *tracked) continues(s *Session) bool {
	return (s.Statement != 0 && s.Statement == t.statement) || (!s.XactStart.IsZero() && s.XactStart.Equal(t.xact))
}

// useAcc integrates one task's use of one resource over the polls.
type useAcc struct {
	hold, wait      time.Duration
	heldAt, waitAt  uint64 // poll number last seen holding / waiting
	windowWaitDelta time.Duration
}

// resAcc integrates one resource over the polls.
type resAcc struct {
	id                  task.ResourceID // stable while the resource is remembered
	kind                resource.Kind
	capacity            int64
	wait, hold          time.Duration
	waits               int64
	evictions, misses   int64
	prevEvict, prevMiss int64
	lastSeen            uint64
}

// Builder turns successive observations of a server into snapshots, the
// same value the in-process controller builds, so that the library's
// policies run on them unchanged. It is not safe for concurrent use.
type Builder struct {
	// Cancellable decides which sessions the policy may choose. Nil: every
	// ordinary client session that runs a statement.
	Cancellable func(*Session) bool
	// MinRun is how long a statement must have run to hold ServerResource
	// as a candidate (0: the throughput's averaging span).
	MinRun time.Duration

	poll       uint64
	origin     time.Time
	lastSnapAt time.Duration
	prevAt     time.Time
	nextID     uint64
	nextRes    task.ResourceID
	tasks      map[taskKey]*tracked
	res        map[string]*resAcc
	prevXct    int64

	// The server's throughput, for the contention of ServerResource.
	throughput *detect.Collapse
	lossSpan   time.Duration // the throughput's averaging span
	lossSince  time.Duration // snapshot time the current loss began; -1: none
	loss       float64
	lockedAt   time.Duration // snapshot time a lock was last contended; 0: never

	// of the last Build: the session and target of every task, the
	// wait-for chains, the sessions whose hold was inferred, and the share
	// of the server's work of each candidate of ServerResource
	targets  map[uint64]Target
	byTask   map[uint64]*Session
	chains   []Chain
	inferred map[int64]bool
	sessions map[int64]*Session
	shares   map[uint64]float64
}

// ServerResource names the server's own capacity to execute statements,
// its CPUs and its I/O, as a resource (kind CPU) of the snapshots. Every
// running statement ([Session.Running]) holds it from its start. Nothing
// outside a server tells how long statements waited for it, so its delay
// is what the server lost: while the throughput (committed transactions,
// or tasks that ended) of the last span is below [LossFraction] of the
// best span of the last ten seconds, the resource's delay in the window is
// the share lost, 1 − recent/best, of the window's execution time, so that
// its contention level is that share. The span is a second for
// [NewBuilder]; a guard's builder uses two polls, at least half a second;
// either, at least twice the counters' lag ([Observation.CountersLag]).
// The live tasks that have not held the server for a span wait for it:
// the short transactions are what the lost throughput consists of. A
// statement holds the server from the first poll that sees it running
// (before, it may have waited for a lock). A loss while a lock is
// contended, or within a span after, is the lock's and not counted. A
// statement that monopolizes the server (a dump reading a table larger
// than the buffer pool, a runaway scan) is then the task whose
// cancellation frees the most of a contended resource, as a lock holder
// is.
const ServerResource = "server"

// lockExplains is the contention level of a lock (its waiters' wait over
// the window's execution time) at which a loss of throughput is the
// lock's, not the server's: the policy's own threshold for a contended
// resource.
const lockExplains = 0.1

// LossFraction: the server's resource counts as contended while the
// throughput of the last span is below this fraction of the recent best.
const LossFraction = 0.8

// NewBuilder returns an empty builder, which averages the server's
// throughput over a second.
func NewBuilder() *Builder { return newBuilder(time.Second) }

// newBuilder returns an empty builder that averages the server's
// throughput over span (compared with the best span of the last ten
// seconds).
func newBuilder(span time.Duration) *Builder {
	return &Builder{tasks: map[taskKey]*tracked{}, res: map[string]*resAcc{},
		targets: map[uint64]Target{}, byTask: map[uint64]*Session{}, shares: map[uint64]float64{},
		throughput: detect.NewCollapse(LossFraction, detect.WithSpan(span)), lossSpan: span, lossSince: -1}
}

// Loss returns the share of the recent best throughput the server lost in
// the last span, and for how long, by the snapshots' clock, it has been
// losing at least 1 − LossFraction of it; 0, 0 when it is not.
func (b *Builder) Loss() (share float64, lasting time.Duration) {
	if b.lossSince < 0 {
		return 0, 0
	}
	return b.loss, b.lastSnapAt - b.lossSince
}

// maxStep bounds the time one poll adds to a hold or a wait: after a
// stall of the guard (a slow poll, a paused process) the gap is not
// credited as if it had been observed.
const maxStep = 5 * time.Second

// maxFirst bounds the hold credited to a task first seen holding (it has
// held since its transaction began): a day, against absurd clocks.
const maxFirst = 24 * time.Hour

// Build returns the snapshot of obs. Sessions the observation repeats
// are taken once (the first); uses of sessions or resources it does not
// list are ignored, and counted in the second result.
//
// Blame follows the wait-for graph (see [Chain]): in the snapshot, a
// session that waits for a lock is a blocked task ([snapshot.Task.Blocked])
// holding nothing, and a contended lock is held by the root blockers of
// its waits only, so that the policy can choose nobody but a root.
func (b *Builder) Build(obs *Observation) (*snapshot.Snapshot, int) {
	b.poll++
	at := obs.At
	var dt time.Duration
	if !b.prevAt.IsZero() {
		dt = min(max(at.Sub(b.prevAt), 0), maxStep)
	}
	b.prevAt = at
	if b.origin.IsZero() || at.Before(b.origin) {
		b.origin = at
	}
	sessions, order, ignored := distinct(obs.Sessions)
	b.noteResources(obs.Resources)
	uses, waiting, chains, inferred := blame(obs.Uses, sessions)
	b.chains, b.inferred, b.sessions = chains, inferred, sessions
	live, taskOf := b.liveTasks(sessions, order, uses, at)
	uses = b.serverUses(sessions, order, taskOf, uses)
	ignored += b.integrate(uses, sessions, taskOf, at, dt)

	// At must grow from poll to poll even when the server's clock does
	// not (it stepped back, or two polls read the same time).
	snapAt := max(at.Sub(b.origin), b.lastSnapAt+time.Millisecond)
	b.lastSnapAt = snapAt
	snap := &snapshot.Snapshot{At: snapAt, Time: at, Window: dt, Precise: true}
	resIndex := b.snapResources(snap)
	b.snapTasks(snap, live, sessions, waiting, resIndex, at)
	b.completions(snap, live, obs, at, dt)
	b.serverContention(snap, resIndex, obs.CountersLag)
	// Resources nobody reported for long are forgotten.
	for name, ra := range b.res {
		if b.poll-ra.lastSeen > 100 {
			delete(b.res, name)
		}
	}
	return snap, ignored
}

// distinct indexes the sessions by ID, keeping the first of a repeated
// ID; order is the observation's order, ignored the repeats.
func distinct(all []Session) (sessions map[int64]*Session, order []int64, ignored int) {
	sessions = make(map[int64]*Session, len(all))
	order = make([]int64, 0, len(all))
	for i := range all {
		s := &all[i]
		if _, dup := sessions[s.ID]; dup {
			ignored++
			continue
		}
		sessions[s.ID] = s
		order = append(order, s.ID)
	}
	return sessions, order, ignored
}

// noteResources remembers the resources the poll reported.
func (b *Builder) noteResources(rs []Resource) {
	for i := range rs {
		r := &rs[i]
		ra := b.res[r.Name]
		if ra == nil {
			b.nextRes++
			ra = &resAcc{id: b.nextRes, prevEvict: r.Evictions, prevMiss: r.Misses}
			b.res[r.Name] = ra
		}
		ra.kind, ra.capacity, ra.lastSeen = r.Kind, r.Capacity, b.poll
		if ra.kind == 0 {
			ra.kind = resource.KindLock
		}
		ra.evictions, ra.misses = r.Evictions, r.Misses
	}
}

// liveTasks finds the tasks: sessions running a statement or holding a
// transaction open, and any session the uses show holding or waiting.
func (b *Builder) liveTasks(sessions map[int64]*Session, order []int64, uses []Use, at time.Time) (map[taskKey]*tracked, map[int64]*tracked) {
	using := map[int64]bool{}
	for _, u := range uses {
		using[u.Session] = true
	}
	live := map[taskKey]*tracked{}
	taskOf := map[int64]*tracked{}
	// The previous poll's task of each session, under its key.
	prev := map[int64]taskKey{}
	for k, t := range b.tasks {
		if t.lastSeen == b.poll-1 {
			prev[k.session] = k
		}
	}
	for _, id := range order {
		s := sessions[id]
		if !s.Active && !s.IdleInTransaction && s.XactStart.IsZero() && !using[id] {
			continue
		}
		k := keyOf(s)
		t := b.tasks[k]
		if pk, ok := prev[id]; t == nil && ok && pk != k {
			if p := b.tasks[pk]; p != nil && p.lastSeen != b.poll && p.continues(s) {
				delete(b.tasks, pk)
				t = p
				b.tasks[k] = t
			}
		}
		if t == nil {
			b.nextID++
			t = &tracked{id: b.nextID, class: s.Fingerprint, first: at, uses: map[string]*useAcc{}}
			if t.class == "" {
				t.class = Fingerprint(s.Query)
			}
			b.tasks[k] = t
		}
		t.lastSeen = b.poll
		if !s.XactStart.IsZero() {
			t.xact = s.XactStart
		}
		if s.Statement != 0 {
			t.statement = s.Statement
		}
		live[k] = t
		taskOf[id] = t
	}
	return live, taskOf
}

// serverUses adds the running statements' holds of ServerResource. The
// resource is kept from the first poll that shows one on, also while
// nobody runs. The uses given are copied, never appended to.
func (b *Builder) serverUses(sessions map[int64]*Session, order []int64, taskOf map[int64]*tracked, uses []Use) []Use {
	uses = slices.Clip(uses)
	server := b.res[ServerResource]
	for _, id := range order {
		if s := sessions[id]; s.Running && taskOf[id] != nil {
			if server == nil {
				b.nextRes++
				server = &resAcc{id: b.nextRes}
				b.res[ServerResource] = server
			}
			uses = append(uses, Use{Session: id, Resource: ServerResource, Held: true})
		}
	}
	if server != nil {
		server.kind, server.lastSeen = resource.KindCPU, b.poll
	}
	return uses
}

// integrate adds the poll's uses to the tasks' and resources' holds and
// waits; it returns the uses it ignored.
func (b *Builder) integrate(uses []Use, sessions map[int64]*Session, taskOf map[int64]*tracked, at time.Time, dt time.Duration) (ignored int) {
	// The tasks seen waiting in the poll before: a lock they hold now and
	// did not then, they took since (a queue draining: each waiter in turn
	// takes the row), not at their transaction's start.
	waited := map[*tracked]bool{}
	for _, t := range taskOf {
		for _, ua := range t.uses {
			if ua.waitAt > 0 && ua.waitAt == b.poll-1 {
				waited[t] = true
				break
			}
		}
	}
	for _, u := range uses {
		t, ra := taskOf[u.Session], b.res[u.Resource]
		if t == nil || ra == nil || (!u.Held && !u.Waiting) {
			ignored++
			continue
		}
		s := sessions[u.Session]
		ua := t.uses[u.Resource]
		if ua == nil {
			ua = &useAcc{}
			t.uses[u.Resource] = ua
		}
		if u.Held {
			if ua.heldAt == b.poll-1 && ua.heldAt > 0 {
				ua.hold += dt
				ra.hold += dt
			} else if ua.heldAt != b.poll {
				// First seen holding: it has held since its transaction
				// (or statement) began, as far as the views tell. The
				// server only since the poll before: a statement first
				// seen running may have spent its age waiting for a lock
				// (a victim just let through), not executing.
				h := clampSince(at, startOf(s), maxFirst)
				if u.Resource == ServerResource {
					h = min(clampSince(at, s.QueryStart, maxFirst), dt)
				} else if waited[t] {
					h = min(h, dt)
				}
				ua.hold += h
				ra.hold += h
			}
			ua.heldAt = b.poll
		}
		if u.Waiting {
			var add time.Duration
			switch {
			case ua.waitAt == b.poll:
				// a second wait row in the same poll: counted once
			case ua.waitAt == b.poll-1 && ua.waitAt > 0:
				add = dt
			case !u.Since.IsZero():
				add = clampSince(at, u.Since, maxStep)
				ra.waits++
			default:
				add = min(dt, clampSince(at, startOf(s), maxStep))
				ra.waits++
			}
			ua.wait += add
			ra.wait += add
			ua.windowWaitDelta += add
			ua.waitAt = b.poll
		}
	}
	return ignored
}

// snapResources fills the snapshot's resources (those of this poll, by
// name) and returns their indexes.
func (b *Builder) snapResources(snap *snapshot.Snapshot) map[string]int32 {
	resIndex := map[string]int32{}
	names := make([]string, 0, len(b.res))
	for name, ra := range b.res {
		if ra.lastSeen == b.poll {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		ra := b.res[name]
		resIndex[name] = int32(len(snap.Resources))
		snap.Resources = append(snap.Resources, snapshot.Resource{
			ID: ra.id, Name: name, Kind: ra.kind, Capacity: ra.capacity,
			Wait: ra.wait, Hold: ra.hold, Waits: ra.waits, Evictions: ra.evictions,
			WindowEvictions: max(ra.evictions-ra.prevEvict, 0), WindowWaits: max(ra.misses-ra.prevMiss, 0),
		})
		ra.prevEvict, ra.prevMiss = ra.evictions, ra.misses
	}
	return resIndex
}

// snapTasks fills the snapshot's tasks and their usage, in the order the
// tasks were first seen, and remembers each task's session and target.
func (b *Builder) snapTasks(snap *snapshot.Snapshot, live map[taskKey]*tracked, sessions map[int64]*Session, waiting map[int64]bool, resIndex map[string]int32, at time.Time) {
	clear(b.targets)
	clear(b.byTask)
	keys := make([]taskKey, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return live[keys[i]].id < live[keys[j]].id })
	for _, k := range keys {
		t := live[k]
		s := sessions[k.session]
		age := clampSince(at, startOf(s), 365*24*time.Hour)
		if s.Age > 0 && s.XactStart.IsZero() {
			age = s.Age
		}
		ti := int32(len(snap.Tasks))
		st := snapshot.Task{
			ID: t.id, Key: s.User + "@" + s.Application, Class: t.class, Kind: task.Request,
			Cancellable: !t.cancelled && b.cancellable(s), Cancelled: t.cancelled, Blocked: waiting[s.ID],
			Active: s.Active, Activities: 1, Age: age, Exec: age,
			Done: max(s.Done, 0), Total: max(s.Total, 0), First: int32(len(snap.Usage)),
		}
		if st.Done > st.Total {
			st.Done = st.Total
		}
		names := make([]string, 0, len(t.uses))
		for name := range t.uses {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ua := t.uses[name]
			ri, ok := resIndex[name]
			held, waiting := ua.heldAt == b.poll, ua.waitAt == b.poll
			if !ok || (!held && !waiting && ua.hold == 0 && ua.wait == 0) {
				continue
			}
			r := &snap.Resources[ri]
			u := snapshot.Usage{Task: ti, Res: ri}
			u.Resource = r.ID
			u.Hold, u.Wait = ua.hold, ua.wait
			if held {
				u.Held = 1
				r.Holders++
				r.Held++
			}
			if waiting {
				u.Waiting = 1
				r.Waiters++
			}
			r.WindowWait += ua.windowWaitDelta
			ua.windowWaitDelta = 0
			snap.Usage = append(snap.Usage, u)
			st.N++
		}
		snap.Tasks = append(snap.Tasks, st)
		b.byTask[t.id] = s
		b.targets[t.id] = Target{Session: s.ID, Statement: s.Statement, QueryStart: s.QueryStart, XactStart: s.XactStart, Query: s.Query}
	}
}

// completions counts the tasks that ended (not seen in this poll) and
// began, and the server's committed transactions when it counts them.
func (b *Builder) completions(snap *snapshot.Snapshot, live map[taskKey]*tracked, obs *Observation, at time.Time, dt time.Duration) {
	for k, t := range b.tasks {
		if t.lastSeen == b.poll {
			continue
		}
		delete(b.tasks, k)
		snap.Completed.Ended++
		if t.cancelled {
			snap.Completed.Failed++
		}
		snap.Completed.Exec += dt / 2
	}
	for k := range live {
		if live[k].first.Equal(at) {
			snap.Completed.Begun++
		}
	}
	if obs.Committed > 0 || obs.RolledBack > 0 {
		x := obs.Committed + obs.RolledBack
		if b.prevXct > 0 && x >= b.prevXct {
			snap.Completed.Ended = uint64(x - b.prevXct)
		}
		b.prevXct = x
	}
}

// holdsLock reports whether the session roots a chain of the last Build.
func (b *Builder) holdsLock(session int64) bool {
	for _, c := range b.chains {
		if c.Root == session {
			return true
		}
	}
	return false
}

// Chains returns the chains of the wait-for graph of the last Build.
func (b *Builder) Chains() []Chain { return slices.Clone(b.chains) }

// Inferred reports whether the last Build's hold of a contended resource
// by the session was inferred by the source (see Use.Inferred).
func (b *Builder) Inferred(session int64) bool { return b.inferred[session] }

// Target returns how to act on the task of the last Build, and its
// session, or false when the last Build had no such task.
func (b *Builder) Target(id uint64) (Target, *Session, bool) {
	t, ok := b.targets[id]
	return t, b.byTask[id], ok
}

// MarkCancelled records that the guard acted on task id: the policy never
// chooses it again.
func (b *Builder) MarkCancelled(id uint64) {
	for _, t := range b.tasks {
		if t.id == id {
			t.cancelled = true
		}
	}
}

func (b *Builder) cancellable(s *Session) bool {
	if b.Cancellable != nil {
		return b.Cancellable(s)
	}
	return !s.Own && s.Kind == "client" && s.Active
}

// startOf is when the session's task began: its transaction, else its
// statement.
func startOf(s *Session) time.Time {
	if !s.XactStart.IsZero() {
		return s.XactStart
	}
	return s.QueryStart
}

// clampSince is at − since in [0, limit]; 0 for a zero since.
func clampSince(at, since time.Time, limit time.Duration) time.Duration {
	if since.IsZero() {
		return 0
	}
	return min(max(at.Sub(since), 0), limit)
}

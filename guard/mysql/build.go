package mysql

import (
	"fmt"
	"strings"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// Build assembles the sessions, resources and uses of one poll from parsed
// rows (pure: the integration of the soft-blocking rule).
//
// mdl lists the granted metadata locks when the server has a metadata lock
// view (non-nil, possibly empty): a table MDL waiter is then attributed to
// the non-waiting sessions holding an MDL on its table. Without a view
// (mdl nil) the holder is inferred (see inferMDL).
func Build(obs *guard.Observation, trxs []Trx, waits []Wait, mdl []MDL) {
	a := &assembly{obs: obs, byID: map[int64]*guard.Session{}, res: map[string]bool{}}
	for i := range obs.Sessions {
		a.byID[obs.Sessions[i].ID] = &obs.Sessions[i]
	}
	a.transactions(trxs)
	a.rowLocks(trxs, waits, mdl)
	a.waiting = map[int64]bool{}
	for _, s := range obs.Sessions {
		if s.WaitEvent != "" {
			a.waiting[s.ID] = true
		}
	}
	a.globalReadLock()
	a.metadataLocks(mdl)
}

// assembly is one Build in progress.
type assembly struct {
	obs     *guard.Observation
	byID    map[int64]*guard.Session
	res     map[string]bool // resources added
	waiting map[int64]bool  // sessions waiting for anything

	trxThread                map[string]int64 // transaction id → thread
	noIDHolders, noIDWaiters []int64          // id-less transactions holding row locks, waiting

	glrRoots []int64 // the statements a queued FLUSH waits for
	flushers []int64 // the FLUSH statements waiting
}

func (a *assembly) addRes(name string) {
	if !a.res[name] {
		a.res[name] = true
		a.obs.Resources = append(a.obs.Resources, guard.Resource{Name: name, Kind: resource.KindLock})
	}
}

// transactions applies INNODB_TRX to the sessions and notes which thread
// runs which transaction.
func (a *assembly) transactions(trxs []Trx) {
	a.trxThread = map[string]int64{}
	for _, t := range trxs {
		if t.ID == noID {
			// The transactions without an id that hold row locks: the
			// candidate holders of a lock whose blocking trx is noID.
			switch {
			case t.State == "RUNNING" && t.RowsLocked > 0:
				a.noIDHolders = append(a.noIDHolders, t.Thread)
			case t.State == "LOCK WAIT":
				a.noIDWaiters = append(a.noIDWaiters, t.Thread)
			}
		} else {
			a.trxThread[t.ID] = t.Thread
		}
		if s := a.byID[t.Thread]; s != nil {
			s.XactStart = t.Started
			s.IdleInTransaction = !s.Active && t.State == "RUNNING"
			// A row-lock wait often shows in PROCESSLIST as "Statistics"
			// or "Updating"; INNODB_TRX is the authority.
			if t.State == "LOCK WAIT" && s.WaitEvent == "" {
				s.WaitEvent = "Lock wait (InnoDB)"
				s.Running = false
			}
			if s.IdleInTransaction {
				s.State = "Sleep in transaction"
			}
		}
	}
}

// rowLocks adds the row and table lock waits: INNODB_LOCK_WAITS names the
// blocking trx directly, and a blocker that itself waits is followed to
// the root.
func (a *assembly) rowLocks(trxs []Trx, waits []Wait, mdl []MDL) {
	blockers := map[int64][]int64{}
	wres := map[int64]Wait{}
	noIDRows := map[int64]int{} // requester → its rows blocked by noID
	var noIDReq []Wait          // the rows whose requester has no id
	for _, w := range waits {
		if w.Requesting == noID {
			noIDReq = append(noIDReq, w)
			continue
		}
		req, ok1 := a.trxThread[w.Requesting]
		if ok1 && w.Blocking == noID {
			noIDRows[req]++
			wres[req] = w
			continue
		}
		blk, ok2 := a.trxThread[w.Blocking]
		if !ok1 || !ok2 {
			a.obs.Skipped["innodb_lock_waits"]++
			continue
		}
		blockers[req] = appendUnique(blockers[req], blk)
		wres[req] = w
	}
	whyReq := resolveNoIDWaiters(noIDReq, a.noIDWaiters, a.byID, a.trxThread, blockers, wres)
	inferredBy, why := resolveNoID(noIDRows, wres, a.noIDHolders, mdl, blockers)
	for req, w := range whyReq {
		why[req] = w
	}
	held := map[[2]any]bool{}
	for req, w := range wres {
		a.addRes(w.Resource)
		roots := roots(req, blockers, wres)
		var since time.Time
		for _, t := range trxs {
			if t.Thread == req {
				since = t.WaitStarted
			}
		}
		u := guard.Use{Session: req, Resource: w.Resource, Mode: w.Mode, Waiting: true, BlockedBy: roots, Since: since}
		if len(roots) == 0 {
			u.Why = unnamed(req, blockers, why)
		}
		for _, r := range roots {
			u.Inferred = u.Inferred || inferredBy[r]
		}
		a.obs.Uses = append(a.obs.Uses, u)
		for _, b := range blockers[req] {
			if _, waits := wres[b]; waits {
				continue // a waiter ahead in the queue holds nothing yet
			}
			if k := [2]any{b, w.Resource}; !held[k] {
				held[k] = true
				a.obs.Uses = append(a.obs.Uses, guard.Use{Session: b, Resource: w.Resource, Held: true, Inferred: inferredBy[b]})
			}
		}
	}
}

// globalReadLock adds the waits for the global read lock, table flushes
// and backup locks (from PROCESSLIST states): a queued FLUSH waits for the
// statements already running when it began, the roots; the FLUSH is a hard
// waiter and every other statement waiting there is soft.
func (a *assembly) globalReadLock() {
	var flushStart time.Time
	for _, s := range a.obs.Sessions {
		if isFTWRL(s.Query) && s.WaitEvent != "" {
			a.flushers = append(a.flushers, s.ID)
			if flushStart.IsZero() || s.QueryStart.Before(flushStart) {
				flushStart = s.QueryStart
			}
		}
	}
	if !flushStart.IsZero() {
		for _, s := range a.obs.Sessions {
			if s.Active && s.WaitEvent == "" && s.Kind == "client" && !s.Own && s.QueryStart.Before(flushStart) && !isFTWRL(s.Query) {
				a.glrRoots = append(a.glrRoots, s.ID)
			}
		}
	}
	for _, s := range a.obs.Sessions {
		switch s.WaitEvent {
		case "Waiting for global read lock", "Waiting for table flush", "Waiting for backup lock":
			a.addRes("global-read-lock")
			// PROCESSLIST has no wait start: a statement waiting on the
			// global read lock waits from its start (the lock is taken
			// when the statement opens its tables), so the wait is dated
			// from it rather than from the poll that first saw it.
			u := guard.Use{Session: s.ID, Resource: "global-read-lock", Mode: s.WaitEvent, Waiting: true, BlockedBy: a.glrRoots, Since: s.QueryStart}
			u.Soft = !isFTWRL(s.Query) && len(a.flushers) > 0
			a.obs.Uses = append(a.obs.Uses, u)
		}
	}
	for _, r := range a.glrRoots {
		a.obs.Uses = append(a.obs.Uses, guard.Use{Session: r, Resource: "global-read-lock", Mode: "statement in flight", Held: true})
	}
}

// metadataLocks adds the metadata locks: the holders a lock view shows
// (mdl non-nil), and the waits for a table's metadata lock, blamed on the
// view's holders or, without a view, on the holder inferred (see
// inferMDL). A waiting DDL is a hard waiter, the statements queued behind
// it soft.
func (a *assembly) metadataLocks(mdl []MDL) {
	for _, m := range mdl {
		if !a.waiting[m.Session] {
			a.addRes("mdl:" + m.Table)
			a.obs.Uses = append(a.obs.Uses, guard.Use{Session: m.Session, Resource: "mdl:" + m.Table, Mode: m.Mode, Held: true})
		}
	}
	inferred := map[string]*inference{}
	var tables []string // of inferred, in order
	for _, s := range a.obs.Sessions {
		if s.WaitEvent != "Waiting for table metadata lock" {
			continue
		}
		table := tableOf(s.Query, s.Database)
		name := "mdl:" + table
		a.addRes(name)
		// Dated from the statement's start, as the global read lock.
		u := guard.Use{Session: s.ID, Resource: name, Mode: s.WaitEvent, Waiting: true, Soft: !isDDL(s.Query), Since: s.QueryStart}
		if mdl == nil {
			inf := inferred[table]
			if inf == nil {
				inf = inferMDL(a.obs.Sessions, table, a.waiting)
				inferred[table] = inf
				tables = append(tables, table)
			}
			if inf.holder != 0 {
				u.BlockedBy, u.Inferred = []int64{inf.holder}, true
			} else {
				u.Why = inf.why
			}
		}
		for _, m := range mdl {
			if m.Table == table && m.Session != s.ID && !a.waiting[m.Session] {
				u.BlockedBy = appendUnique(u.BlockedBy, m.Session)
			}
		}
		a.obs.Uses = append(a.obs.Uses, u)
	}
	for _, table := range tables {
		if inf := inferred[table]; inf.holder != 0 {
			a.obs.Uses = append(a.obs.Uses, guard.Use{Session: inf.holder, Resource: "mdl:" + table, Mode: "inferred", Held: true, Inferred: true})
		}
	}
}

// inference is the holder inferred of a table's metadata lock (0: none),
// and why none.
type inference struct {
	holder int64
	why    string
}

// inferMDL infers who holds the metadata lock of table that sessions wait
// for, without a metadata lock view: a metadata lock is held by a
// statement that opened the table, until its transaction ends. So the
// candidates are the client sessions, not waiting themselves, that began
// before the first waiter and either run a statement naming the table, or
// hold a transaction open (INNODB_TRX) in the table's database (an
// earlier statement of it may have opened the table). Exactly one
// candidate is the holder; with none or several, nobody is.
func inferMDL(sessions []guard.Session, table string, waiting map[int64]bool) *inference {
	var first time.Time
	for _, s := range sessions {
		if s.WaitEvent == "Waiting for table metadata lock" && tableOf(s.Query, s.Database) == table {
			if first.IsZero() || s.QueryStart.Before(first) {
				first = s.QueryStart
			}
		}
	}
	db, _, _ := strings.Cut(table, ".")
	var cands []int64
	for _, s := range sessions {
		if s.Kind != "client" || s.Own || waiting[s.ID] || first.IsZero() {
			continue
		}
		names := s.Active && !s.QueryStart.IsZero() && s.QueryStart.Before(first) && namesTable(s.Query, s.Database, table)
		inTrx := !s.XactStart.IsZero() && s.XactStart.Before(first) && s.Database == db
		if names || inTrx {
			cands = append(cands, s.ID)
		}
	}
	switch len(cands) {
	case 1:
		return &inference{holder: cands[0]}
	case 0:
		return &inference{why: "metadata lock holder not inferred (no metadata lock view): no session that began before the first waiter uses " + table}
	}
	return &inference{why: fmt.Sprintf("metadata lock holder not inferred (no metadata lock view): %d sessions may hold it", len(cands))}
}

// namesTable reports whether statement q (run in database db) names table
// (db.table) after FROM, INTO, UPDATE, TABLE or JOIN.
func namesTable(q, db, table string) bool {
	f := strings.Fields(q)
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "FROM", "INTO", "UPDATE", "TABLE", "JOIN":
			if tableOf(f[i]+" "+f[i+1], db) == table {
				return true
			}
		}
	}
	return false
}

// roots returns the root blockers of s's chain: the blockers, followed
// through those that wait themselves (waiting), that do not wait. A
// waiter whose own blockers are unknown ends the walk with no root: it
// is never a root.
func roots(s int64, blockers map[int64][]int64, waiting map[int64]Wait) []int64 {
	var out []int64
	seen := map[int64]bool{s: true}
	var walk func(int64)
	walk = func(x int64) {
		for _, b := range blockers[x] {
			if seen[b] {
				continue
			}
			seen[b] = true
			if _, w := waiting[b]; w {
				walk(b)
			} else {
				out = appendUnique(out, b)
			}
		}
	}
	walk(s)
	return out
}

// resolveNoIDWaiters gives the waiters without a transaction id (a
// locking read waiting: requesting_trx_id 0, as its blocking_trx_id when
// it blocks) their blockers. Which id-less waiter a wait row is for does
// not show; a waiter's statement (it waits in it) names its table, so
// its rows are among those on that table, and when those are all on one
// record it waits for that record: it gets the blockers of all of them
// (queued ones lead, through their own waits, to the record's holders,
// the roots of every waiter of it). Rows on several records of its table
// leave it unnamed (the returned reasons). An id-less blocker of an
// id-less waiter is not named.
func resolveNoIDWaiters(rows []Wait, waiters []int64, byID map[int64]*guard.Session, trxThread map[string]int64, blockers map[int64][]int64, wres map[int64]Wait) map[int64]string {
	why := map[int64]string{}
	for _, z := range waiters {
		s := byID[z]
		var mine []Wait
		for _, w := range rows {
			if s != nil && namesTable(s.Query, s.Database, w.Table) {
				mine = append(mine, w)
			}
		}
		if len(mine) == 0 {
			continue // not seen waiting in the rows (the views' caches differ)
		}
		wres[z] = mine[0]
		one := true
		for _, w := range mine {
			one = one && w.Resource == mine[0].Resource
		}
		if !one {
			why[z] = fmt.Sprintf("the waiting transaction has no id in INNODB_TRX (a locking read): its wait is one of %d on several records of %s", len(mine), mine[0].Table)
			continue
		}
		for _, w := range mine {
			if b, ok := trxThread[w.Blocking]; ok && b != z {
				blockers[z] = appendUnique(blockers[z], b)
			}
		}
		if len(blockers[z]) == 0 {
			why[z] = "the waiting transaction and the lock's holder have no id in INNODB_TRX (locking reads)"
		}
	}
	return why
}

// resolveNoID names the holders of the locks whose blocking trx has no
// id (noID): a transaction that only took locking reads. INNODB_TRX
// shows such transactions, not which lock each holds; the candidates for
// a requester's noID rows are the id-less transactions holding row locks
// (and, with a metadata lock view, holding the table: a row lock implies
// its table's metadata lock). When the candidates are exactly as many as
// the requester's noID rows, each row is one of them and they are its
// blockers (marked inferred); otherwise the holder is not named, and
// why[req] says so. The real holders are always among the candidates, so
// a named one is never a bystander.
func resolveNoID(rows map[int64]int, wres map[int64]Wait, holders []int64, mdl []MDL, blockers map[int64][]int64) (inferred map[int64]bool, why map[int64]string) {
	inferred, why = map[int64]bool{}, map[int64]string{}
	for req, n := range rows {
		table := wres[req].Table
		var cands []int64
		for _, h := range holders {
			if h == req || (mdl != nil && !holdsMDL(mdl, h, table)) {
				continue
			}
			cands = append(cands, h)
		}
		if len(cands) != n {
			why[req] = fmt.Sprintf("the lock's holder has no transaction id in INNODB_TRX (it only took locking reads): %d such transaction(s) may hold the %d lock(s) it waits for", len(cands), n)
			continue
		}
		for _, h := range cands {
			blockers[req] = appendUnique(blockers[req], h)
			inferred[h] = true
		}
	}
	return inferred, why
}

func holdsMDL(mdl []MDL, session int64, table string) bool {
	for _, m := range mdl {
		if m.Session == session && m.Table == table {
			return true
		}
	}
	return false
}

// unnamed says why req's chain has no root: the first reason found along
// it (a holder without a transaction id), or that its blockers all wait.
func unnamed(req int64, blockers map[int64][]int64, why map[int64]string) string {
	seen := map[int64]bool{}
	var find func(int64) string
	find = func(x int64) string {
		if seen[x] {
			return ""
		}
		seen[x] = true
		if w := why[x]; w != "" {
			return w
		}
		for _, b := range blockers[x] {
			if w := find(b); w != "" {
				return w
			}
		}
		return ""
	}
	if w := find(req); w != "" {
		return w
	}
	return "every session it waits for waits itself"
}

func appendUnique(xs []int64, x int64) []int64 {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func isFTWRL(q string) bool {
	u := strings.ToUpper(strings.Join(strings.Fields(q), " "))
	return strings.HasPrefix(u, "FLUSH TABLES") && strings.Contains(u, "READ LOCK") || strings.HasPrefix(u, "BACKUP STAGE")
}

func isDDL(q string) bool {
	u := strings.ToUpper(strings.TrimSpace(q))
	for _, p := range []string{"ALTER ", "DROP ", "CREATE ", "RENAME ", "TRUNCATE ", "OPTIMIZE ", "LOCK TABLE"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// tableOf finds the first table a statement names (after FROM, INTO,
// UPDATE, TABLE or JOIN); "?" when none.
func tableOf(q, db string) string {
	f := strings.Fields(q)
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "FROM", "INTO", "UPDATE", "TABLE", "JOIN":
			t := strings.Trim(f[i+1], "`;(),")
			if t == "" {
				continue
			}
			t = strings.ReplaceAll(t, "`", "")
			if !strings.Contains(t, ".") && db != "" {
				t = db + "." + t
			}
			return t
		}
	}
	return "?"
}

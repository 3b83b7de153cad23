package mysql

import (
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/internal/seeds"
)

func ns(s string) sql.NullString   { return sql.NullString{String: s, Valid: true} }
func ni(n int64) sql.NullInt64     { return sql.NullInt64{Int64: n, Valid: true} }
func nf(f float64) sql.NullFloat64 { return sql.NullFloat64{Float64: f, Valid: true} }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func proc(id int64, cmd string, ms float64, state, info string, qid int64) ProcRow {
	r := ProcRow{ID: ni(id), User: ns("app"), Host: ns("127.0.0.1:5000"), DB: ns("test"), Command: ns(cmd), TimeMS: nf(ms), State: ns(state), QueryID: ni(qid)}
	if info != "" {
		r.Info = ns(info)
	}
	return r
}

func TestParseSessionSkips(t *testing.T) {
	bad := []ProcRow{
		{},
		proc(1, "Dance", 1, "", "", 1),
		proc(1, "Query", -5, "", "SELECT 1", 1),
		proc(0, "Query", 5, "", "SELECT 1", 1),
		func() ProcRow { r := proc(1, "Query", 5, "", "SELECT 1", 1); r.QueryID = sql.NullInt64{}; return r }(),
		func() ProcRow { r := proc(1, "Query", 5, "", "SELECT 1", 1); r.TimeMS = sql.NullFloat64{}; return r }(),
	}
	for i, r := range bad {
		if _, ok := ParseSession(r, t0); ok {
			t.Errorf("row %d parsed, want skipped", i)
		}
	}
	s, ok := ParseSession(proc(7, "Query", 1500, "Waiting for table metadata lock", "SELECT * FROM t WHERE a = 5", 42), t0)
	if !ok {
		t.Fatal("good row skipped")
	}
	want := guard.Session{ID: 7, Statement: 42, User: "app", Database: "test", ClientAddr: "127.0.0.1:5000", Kind: "client", State: "Query", Active: true,
		Query: "SELECT * FROM t WHERE a = 5", Fingerprint: guard.Fingerprint("SELECT * FROM t WHERE a = 5"),
		QueryStart: t0.Add(-1500 * time.Millisecond), StateChange: t0.Add(-1500 * time.Millisecond), Age: 1500 * time.Millisecond,
		WaitEvent: "Waiting for table metadata lock"}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("session (-want +got):\n%s", d)
	}
	sys := proc(2, "Daemon", 0, "InnoDB purge worker", "", 0)
	sys.User = ns("system user")
	if s, _ := ParseSession(sys, t0); s.Kind != "system user" || s.Active {
		t.Errorf("system thread: kind %q active %v", s.Kind, s.Active)
	}
}

func TestParseWait(t *testing.T) {
	row := WaitRow{Requesting: ns("10"), Blocking: ns("9"), LockID: ns("10:5:3:2"), Mode: ns("X"), Type: ns("RECORD"), Table: ns("`test`.`gm_t`")}
	w, ok := ParseWait(row)
	if !ok || w.Resource != "row:test.gm_t/5:3:2" {
		t.Fatalf("ParseWait = %+v, %v", w, ok)
	}
	for _, id := range []string{"10:x:3:2", "10:5:3", "", "10::3:2"} {
		r := row
		r.LockID = ns(id)
		if _, ok := ParseWait(r); ok {
			t.Errorf("lock id %q parsed, want skipped", id)
		}
	}
	r := row
	r.Type, r.LockID = ns("TABLE"), ns("10:77")
	if w, ok := ParseWait(r); !ok || w.Resource != "relation:test.gm_t" {
		t.Errorf("table lock = %+v, %v", w, ok)
	}
}

func TestParseTrx(t *testing.T) {
	ok := TrxRow{ID: ns("77"), Thread: ni(5), Started: sql.NullTime{Time: t0, Valid: true}, State: ns("LOCK WAIT")}
	if _, good := ParseTrx(ok); !good {
		t.Error("good trx skipped")
	}
	bad := ok
	bad.State = ns("DANCING")
	if _, good := ParseTrx(bad); good {
		t.Error("unknown trx state parsed")
	}
	bad = ok
	bad.Thread = sql.NullInt64{}
	if _, good := ParseTrx(bad); good {
		t.Error("NULL thread parsed")
	}
}

func TestParseGrantAndVersion(t *testing.T) {
	g := ParseGrant("GRANT PROCESS, CONNECTION ADMIN ON *.* TO `g`@`%`")
	if d := cmp.Diff(map[string]bool{"PROCESS": true, "CONNECTION ADMIN": true}, g); d != "" {
		t.Error(d)
	}
	if len(ParseGrant("GRANT ALL PRIVILEGES ON `test`.* TO `g`@`%`")) != 0 {
		t.Error("database grant counted as global")
	}
	for v, ok := range map[string]bool{"10.11.19-MariaDB-0+deb12u1": true, "11.4.2-MariaDB": true, "10.5.1-MariaDB": false, "8.0.36": false, "garbage-mariadb": false} {
		if err := ParseVersion(v); (err == nil) != ok {
			t.Errorf("ParseVersion(%q) = %v", v, err)
		}
	}
}

// The FTWRL case, scripted: a long UPDATE (1), FTWRL queued behind it (2),
// a later INSERT queued behind the FTWRL (3).
func TestBuildFTWRL(t *testing.T) {
	obs := &guard.Observation{Skipped: map[string]int{}}
	for _, r := range []ProcRow{
		proc(1, "Query", 9000, "Updating", "UPDATE gm_t SET v = v + 1", 11),
		proc(2, "Query", 4000, "Waiting for global read lock", "FLUSH TABLES WITH READ LOCK", 12),
		proc(3, "Query", 1000, "Waiting for global read lock", "INSERT INTO gm_t VALUES (1)", 13),
		proc(4, "Query", 500, "Sending data", "SELECT 1", 14), // younger than the FTWRL: not a holder
	} {
		s, _ := ParseSession(r, t0)
		obs.Sessions = append(obs.Sessions, s)
	}
	Build(obs, nil, nil, nil)
	want := []guard.Use{
		// The waits date from their statements' starts (TIME_MS ago).
		{Session: 2, Resource: "global-read-lock", Mode: "Waiting for global read lock", Waiting: true, BlockedBy: []int64{1}, Since: t0.Add(-4 * time.Second)},
		{Session: 3, Resource: "global-read-lock", Mode: "Waiting for global read lock", Waiting: true, BlockedBy: []int64{1}, Soft: true, Since: t0.Add(-time.Second)},
		{Session: 1, Resource: "global-read-lock", Mode: "statement in flight", Held: true},
	}
	if d := cmp.Diff(want, obs.Uses); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
}

func TestBuildRowLockChain(t *testing.T) {
	obs := &guard.Observation{Skipped: map[string]int{}}
	for _, r := range []ProcRow{proc(1, "Sleep", 9000, "", "", 11), proc(2, "Query", 3000, "Updating", "UPDATE gm_t SET v=1", 12), proc(3, "Query", 1000, "Updating", "UPDATE gm_t SET v=2", 13)} {
		s, _ := ParseSession(r, t0)
		obs.Sessions = append(obs.Sessions, s)
	}
	trx := []Trx{{ID: "a", Thread: 1, Started: t0, State: "RUNNING"}, {ID: "b", Thread: 2, Started: t0, State: "LOCK WAIT"}, {ID: "c", Thread: 3, Started: t0, State: "LOCK WAIT"}}
	waits := []Wait{{Requesting: "b", Blocking: "a", Resource: "row:test.gm_t", Mode: "X"}, {Requesting: "c", Blocking: "b", Resource: "row:test.gm_t", Mode: "X"}, {Requesting: "c", Blocking: "zz"}}
	Build(obs, trx, waits, nil)
	if obs.Skipped["innodb_lock_waits"] != 1 {
		t.Errorf("skipped %v, want the unknown trx counted", obs.Skipped)
	}
	if !obs.Sessions[0].IdleInTransaction {
		t.Error("holder not idle in transaction")
	}
	for _, u := range obs.Uses {
		if u.Waiting && !cmp.Equal(u.BlockedBy, []int64{1}) {
			t.Errorf("session %d blocked by %v, want root [1]", u.Session, u.BlockedBy)
		}
	}
}

func FuzzParseSession(f *testing.F) {
	f.Add(int64(1), "Query", 12.5, "Waiting for table metadata lock", "SELECT 1", int64(3), true)
	f.Add(int64(-1), "Sleep", -1.0, "", "", int64(0), false)
	f.Add(int64(2), "Query", math.NaN(), "", "x", int64(1), true)
	f.Fuzz(func(t *testing.T, id int64, cmd string, ms float64, state, info string, qid int64, valid bool) {
		r := ProcRow{ID: sql.NullInt64{Int64: id, Valid: valid}, Command: ns(cmd), TimeMS: nf(ms), State: ns(state), Info: ns(info), QueryID: ni(qid)}
		s, ok := ParseSession(r, t0)
		if ok && (s.ID <= 0 || s.Age < 0 || !valid) {
			t.Fatalf("accepted bad row: %+v", s)
		}
	})
}

func FuzzParseWait(f *testing.F) {
	f.Add("1", "2", "1:2:3:4", "RECORD", "`a`.`b`")
	f.Add("1", "2", "1:2", "TABLE", "a.b")
	f.Add("", "", "::", "X", "")
	f.Fuzz(func(t *testing.T, req, blk, id, typ, table string) {
		w, ok := ParseWait(WaitRow{Requesting: ns(req), Blocking: ns(blk), LockID: ns(id), Type: ns(typ), Table: ns(table)})
		if ok && w.Resource == "" {
			t.Fatal("accepted wait without a resource")
		}
	})
}

// A metadata lock queue with a lock view: a reader holds the table's MDL
// (1), an ALTER waits (2), a later SELECT waits behind it (3).
func TestBuildMDLWithView(t *testing.T) {
	obs := &guard.Observation{Skipped: map[string]int{}}
	for _, r := range []ProcRow{
		proc(1, "Sleep", 9000, "", "", 11),
		proc(2, "Query", 3000, "Waiting for table metadata lock", "ALTER TABLE gm_m ADD COLUMN w INT", 12),
		proc(3, "Query", 1000, "Waiting for table metadata lock", "SELECT * FROM gm_m", 13),
	} {
		s, _ := ParseSession(r, t0)
		obs.Sessions = append(obs.Sessions, s)
	}
	mdl := []MDL{{Session: 1, Mode: "MDL_SHARED_READ", Table: "test.gm_m"}, {Session: 2, Mode: "MDL_SHARED_UPGRADABLE", Table: "test.gm_m"}}
	Build(obs, nil, nil, mdl)
	want := []guard.Use{
		{Session: 1, Resource: "mdl:test.gm_m", Mode: "MDL_SHARED_READ", Held: true},
		{Session: 2, Resource: "mdl:test.gm_m", Mode: "Waiting for table metadata lock", Waiting: true, BlockedBy: []int64{1}, Since: t0.Add(-3 * time.Second)},
		{Session: 3, Resource: "mdl:test.gm_m", Mode: "Waiting for table metadata lock", Waiting: true, BlockedBy: []int64{1}, Soft: true, Since: t0.Add(-time.Second)},
	}
	if d := cmp.Diff(want, obs.Uses); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
	if _, ok := ParseMDL(sql.NullInt64{}, ns("X"), ns("a"), ns("b")); ok {
		t.Error("NULL thread parsed")
	}
}

// FuzzBuild feeds Build rows of all four views built from fuzzed values,
// parsed as the poller parses them: whatever the rows, Build terminates
// (wait-for cycles included), every use names a resource of the
// observation, and no session is its own blocker.
func FuzzBuild(f *testing.F) {
	f.Add(int64(1), int64(2), "Query", "Waiting for table metadata lock", "ALTER TABLE t ADD c INT", "LOCK WAIT", "1:2:3:4", "RECORD", "`test`.`t`", "SHARED_READ", "test", "t", true)
	f.Add(int64(2), int64(2), "Sleep", "", "", "RUNNING", "1:2", "TABLE", "t", "", "", "", false)
	f.Add(int64(3), int64(-1), "Query", "Waiting for global read lock", "FLUSH TABLES WITH READ LOCK", "ROLLING BACK", "x", "", "", "MDL_SHARED", "a", "b", true)
	f.Fuzz(func(t *testing.T, a, b int64, cmd, state, info, trxState, lockID, lockType, table, mode, schema, tbl string, swap bool) {
		obs := &guard.Observation{Skipped: map[string]int{}}
		for _, r := range []ProcRow{proc(a, cmd, 1000, state, info, 7), proc(b, "Query", 500, state, info, 8), proc(a+1, "Query", 200, "Waiting for table metadata lock", "SELECT 1 FROM "+tbl, 9)} {
			if s, ok := ParseSession(r, t0); ok {
				obs.Sessions = append(obs.Sessions, s)
			}
		}
		var trxs []Trx
		for i, r := range []TrxRow{
			{ID: ns("10"), Thread: ni(a), Started: sql.NullTime{Time: t0.Add(-time.Second), Valid: true}, State: ns(trxState), WaitStarted: sql.NullTime{Time: t0, Valid: swap}},
			{ID: ns("11"), Thread: ni(b), Started: sql.NullTime{Time: t0, Valid: true}, State: ns("LOCK WAIT")},
		} {
			if tr, ok := ParseTrx(r); ok {
				trxs = append(trxs, tr)
			} else if i == 0 && trxState == "RUNNING" && a > 0 {
				t.Fatalf("valid trx row skipped: %+v", r)
			}
		}
		req, blk := "11", "10"
		if swap {
			req, blk = blk, req
		}
		var waits []Wait
		for _, r := range []WaitRow{
			{Requesting: ns(req), Blocking: ns(blk), LockID: ns(lockID), Mode: ns(mode), Type: ns(lockType), Table: ns(table)},
			{Requesting: ns(blk), Blocking: ns(req), LockID: ns(lockID), Mode: ns(mode), Type: ns(lockType), Table: ns(table)}, // a deadlock
		} {
			if w, ok := ParseWait(r); ok {
				waits = append(waits, w)
			}
		}
		var mdl []MDL
		for _, th := range []int64{a, b, a + 1} {
			if m, ok := ParseMDL(ni(th), ns(mode), ns(schema), ns(tbl)); ok {
				mdl = append(mdl, m)
			}
		}
		Build(obs, trxs, waits, mdl)
		names := map[string]bool{}
		for _, r := range obs.Resources {
			names[r.Name] = true
		}
		for _, u := range obs.Uses {
			if !names[u.Resource] {
				t.Fatalf("use %+v names no resource of %v", u, obs.Resources)
			}
			for _, by := range u.BlockedBy {
				if by == u.Session {
					t.Fatalf("session %d blocked by itself: %+v", u.Session, u)
				}
			}
		}
	})
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"mysql://root@tcp(127.0.0.1:3306)/", "mariadb://u:p@tcp(h:1)/db?timeout=1s", "root@/", "mysql://", "u:p@tcp(/x", "?=&", "mysql://u@tcp(h)/db?loc=Nowhere"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseDSN(s)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("ParseDSN(%q) = %v, %v: want a config or an error", s, cfg, err)
		}
		if err == nil && (!cfg.ParseTime || cfg.Loc != time.UTC) {
			t.Fatalf("ParseDSN(%q): times not parsed in UTC", s)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"10.11.19-MariaDB-0+deb12u1", "8.0.36", "10.5.1-MariaDB", "MariaDB", "11.4.2-MariaDB-log", "-1.-1-mariadb", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := ParseVersion(s); err == nil && !strings.Contains(strings.ToLower(s), "mariadb") {
			t.Fatalf("ParseVersion(%q) accepted a server that is not MariaDB", s)
		}
	})
}

func FuzzParseGrant(f *testing.F) {
	for _, s := range []string{"GRANT PROCESS, CONNECTION ADMIN ON *.* TO `g`@`%`", "GRANT ALL PRIVILEGES ON `db`.* TO x", "grant select on *.* to y", "GRANT ON *.*", "GRANT ,,, ON *.*", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		privs := ParseGrant(s)
		for p := range privs {
			if p == "" || p != strings.ToUpper(p) || p != strings.TrimSpace(p) {
				t.Fatalf("ParseGrant(%q) gave privilege %q", s, p)
			}
		}
		if len(privs) > 0 && !strings.Contains(strings.ToUpper(s), "*.*") {
			t.Fatalf("ParseGrant(%q) = %v from a grant that is not global", s, privs)
		}
	})
}

// Without a metadata lock view, the holder of a table's metadata lock is
// inferred when exactly one session can hold it: one that began before
// the first waiter and runs a statement naming the table, or holds a
// transaction open in the table's database. With two, nobody is blamed.
func TestBuildMDLInferred(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders []ProcRow
		trx     []Trx
		want    int64 // 0: none
	}{
		{"a long read", []ProcRow{proc(1, "Query", 9000, "User sleep", "SELECT SLEEP(100) FROM gm_m", 11)}, nil, 1},
		{"idle in transaction", []ProcRow{proc(1, "Sleep", 9000, "", "", 11)}, []Trx{{ID: "a", Thread: 1, Started: t0.Add(-9 * time.Second), State: "RUNNING"}}, 1},
		{"younger than the waiter", []ProcRow{proc(1, "Query", 500, "User sleep", "SELECT SLEEP(100) FROM gm_m", 11)}, nil, 0},
		{"another table", []ProcRow{proc(1, "Query", 9000, "User sleep", "SELECT SLEEP(100) FROM gm_other", 11)}, nil, 0},
		{"two candidates", []ProcRow{proc(1, "Query", 9000, "User sleep", "SELECT SLEEP(100) FROM gm_m", 11), proc(4, "Query", 8000, "Sending data", "SELECT * FROM test.gm_m", 14)}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &guard.Observation{Skipped: map[string]int{}}
			for _, r := range append(tc.holders,
				proc(2, "Query", 3000, "Waiting for table metadata lock", "ALTER TABLE gm_m ADD COLUMN w INT", 12),
				proc(3, "Query", 1000, "Waiting for table metadata lock", "SELECT * FROM gm_m", 13)) {
				s, _ := ParseSession(r, t0)
				obs.Sessions = append(obs.Sessions, s)
			}
			Build(obs, tc.trx, nil, nil)
			held := false
			for _, u := range obs.Uses {
				switch {
				case u.Waiting && tc.want != 0 && (!slices.Equal(u.BlockedBy, []int64{tc.want}) || !u.Inferred):
					t.Errorf("wait %+v: want blocked by %d, inferred", u, tc.want)
				case u.Waiting && tc.want == 0 && (len(u.BlockedBy) != 0 || u.Why == ""):
					t.Errorf("wait %+v: want no holder, and why", u)
				case u.Held:
					held = u.Session == tc.want && u.Inferred && u.Resource == "mdl:test.gm_m"
				}
			}
			if held != (tc.want != 0) {
				t.Errorf("uses %+v: want the inferred hold of %d", obs.Uses, tc.want)
			}
		})
	}
}

// TestRandomInnoDBQueues: random record-lock queues as INNODB_LOCK_WAITS
// shows them (each waiter listed as blocked by the granted holder and by
// every waiter ahead of it in the row's queue), some rows' holders
// themselves queued on another row: every wait resolves to the roots,
// never to a waiter. MOIRAI_SEED replays one.
func TestRandomInnoDBQueues(t *testing.T) {
	seeds := seeds.Of(t, 200)
	for _, seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 2))
		obs := &guard.Observation{Skipped: map[string]int{}}
		var trxs []Trx
		var waits []Wait
		rootOf := map[int64]int64{} // waiter → its root
		id := int64(0)
		trx := func(waiting bool) int64 {
			id++
			s, _ := ParseSession(proc(id, "Query", 1000, "Updating", "UPDATE gm_t SET v = 1", 100+id), t0)
			obs.Sessions = append(obs.Sessions, s)
			state := "RUNNING"
			if waiting {
				state = "LOCK WAIT"
			}
			trxs = append(trxs, Trx{ID: fmt.Sprint("t", id), Thread: id, Started: t0, State: state})
			return id
		}
		rows := 1 + r.IntN(3)
		for row := range rows {
			holder := trx(false)
			root := holder
			if row > 0 && r.IntN(3) == 0 {
				// This row's holder waits, last in the previous row's
				// queue: its queue's root is that row's.
				prev := id - 1
				root = rootOf[prev]
				if root == 0 {
					root = prev
				}
				trxs[len(trxs)-1].State = "LOCK WAIT"
				waits = append(waits, Wait{Requesting: fmt.Sprint("t", holder), Blocking: fmt.Sprint("t", prev), Resource: fmt.Sprint("row:test.gm_r", row-1), Mode: "X"})
				rootOf[holder] = root
			}
			queue := []int64{holder}
			for range 2 + r.IntN(29) {
				w := trx(true)
				for _, ahead := range queue {
					waits = append(waits, Wait{Requesting: fmt.Sprint("t", w), Blocking: fmt.Sprint("t", ahead), Resource: fmt.Sprint("row:test.gm_r", row), Mode: "X"})
				}
				queue = append(queue, w)
				rootOf[w] = root
			}
		}
		r.Shuffle(len(waits), func(i, j int) { waits[i], waits[j] = waits[j], waits[i] })
		Build(obs, trxs, waits, nil)
		for _, u := range obs.Uses {
			if !u.Waiting {
				continue
			}
			if want := rootOf[u.Session]; !slices.Equal(u.BlockedBy, []int64{want}) {
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): session %d blocked by %v, want its root %d", seed, seed, u.Session, u.BlockedBy, want)
			}
		}
	}
}

// TestRandomNoIDHolders: row locks held by transactions InnoDB shows
// without an id (locking reads only: trx_id 0, and blocking_trx_id 0 in
// every wait row on them), several to a row, with id-less bystanders
// holding other rows (of the same table or another) and id-less readers
// holding none, with and without a metadata lock view. The waiters of a
// row are blamed on exactly its holders when the candidates can be told
// apart (as many candidates as id-less rows), and on nobody otherwise,
// with the reason; never on a bystander, a reader or a waiter.
// MOIRAI_SEED replays one.
//
// long: the generator and its oracle in one place.
func TestRandomNoIDHolders(t *testing.T) {
	for _, seed := range seeds.Of(t, 300) {
		r := rand.New(rand.NewPCG(seed, 5))
		obs := &guard.Observation{Skipped: map[string]int{}}
		var trxs []Trx
		var waits []Wait
		var mdl []MDL
		view := r.IntN(2) == 0
		id := int64(0)
		session := func(q string) int64 {
			id++
			s, _ := ParseSession(proc(id, "Query", 1000, "User sleep", q, 100+id), t0)
			obs.Sessions = append(obs.Sessions, s)
			return id
		}
		holders := map[int64]bool{}
		table := "test.gm_h"
		for range 1 + r.IntN(3) { // the hot row's id-less holders
			h := session("SELECT SLEEP(20)")
			holders[h] = true
			trxs = append(trxs, Trx{ID: noID, Thread: h, Started: t0, State: "RUNNING", RowsLocked: 1})
			mdl = append(mdl, MDL{Session: h, Mode: "MDL_SHARED_READ", Table: table})
		}
		sameTable := 0
		for range r.IntN(3) { // id-less bystanders holding another row
			b := session("SELECT SLEEP(20)")
			tb := table
			if r.IntN(2) == 0 {
				tb = "test.gm_other"
			} else {
				sameTable++
			}
			trxs = append(trxs, Trx{ID: noID, Thread: b, Started: t0, State: "RUNNING", RowsLocked: 1 + int64(r.IntN(3))})
			mdl = append(mdl, MDL{Session: b, Mode: "MDL_SHARED_READ", Table: tb})
		}
		for range r.IntN(3) { // id-less readers holding no row lock
			rd := session("SELECT SLEEP(20)")
			trxs = append(trxs, Trx{ID: noID, Thread: rd, Started: t0, State: "RUNNING"})
		}
		var queue []int64
		for range 1 + r.IntN(6) { // the X waiters, in queue order
			w := session("UPDATE gm_h SET v = v + 1 WHERE id = 4")
			wid := fmt.Sprint("t", w)
			trxs = append(trxs, Trx{ID: wid, Thread: w, Started: t0, State: "LOCK WAIT"})
			for range holders {
				waits = append(waits, Wait{Requesting: wid, Blocking: noID, Resource: "row:" + table + "/5:3:4", Mode: "X", Table: table})
			}
			for _, ahead := range queue {
				waits = append(waits, Wait{Requesting: wid, Blocking: fmt.Sprint("t", ahead), Resource: "row:" + table + "/5:3:4", Mode: "X", Table: table})
			}
			queue = append(queue, w)
		}
		r.Shuffle(len(waits), func(i, j int) { waits[i], waits[j] = waits[j], waits[i] })
		var m []MDL
		if view {
			m = mdl
		}
		Build(obs, trxs, waits, m)
		// Told apart: with a view, the bystanders on the same table are
		// the only other candidates; without one, every bystander is.
		others := sameTable
		if !view {
			others = 0
			for _, tx := range trxs {
				if tx.ID == noID && tx.RowsLocked > 0 && !holders[tx.Thread] {
					others++
				}
			}
		}
		named := others == 0
		for _, u := range obs.Uses {
			if u.Held && !holders[u.Session] && strings.HasPrefix(u.Resource, "row:") {
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): session %d shown holding %s; holders %v", seed, seed, u.Session, u.Resource, holders)
			}
			if !u.Waiting {
				continue
			}
			for _, b := range u.BlockedBy {
				if !holders[b] {
					t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): waiter %d blamed on %d, not a holder (holders %v, view %v)", seed, seed, u.Session, b, holders, view)
				}
			}
			switch {
			case named && len(u.BlockedBy) != len(holders):
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): waiter %d blocked by %v, want all of %v (view %v)", seed, seed, u.Session, u.BlockedBy, holders, view)
			case named && !u.Inferred:
				t.Fatalf("seed %d: waiter %d's blame on id-less holders not marked inferred", seed, u.Session)
			case !named && (len(u.BlockedBy) != 0 || !strings.Contains(u.Why, "no transaction id")):
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): waiter %d blocked by %v (why %q), want nobody named: %d other candidates", seed, seed, u.Session, u.BlockedBy, u.Why, others)
			}
		}
	}
}

// TestRandomNoIDWaiters: locking reads waiting without a transaction id
// (requesting_trx_id 0 in every row) on 1–3 tables, one or two records a
// table, each record held by a writer with an id, with id-less waiters of
// other tables and rows shuffled: a waiter is blamed on its record's
// writer exactly when its table's rows are all on one record, on nobody
// (with the reason) otherwise, and never on another session.
// MOIRAI_SEED replays one.
func TestRandomNoIDWaiters(t *testing.T) {
	for _, seed := range seeds.Of(t, 300) {
		r := rand.New(rand.NewPCG(seed, 6))
		obs := &guard.Observation{Skipped: map[string]int{}}
		var trxs []Trx
		var waits []Wait
		id := int64(0)
		session := func(q string) int64 {
			id++
			s, _ := ParseSession(proc(id, "Query", 1000, "Statistics", q, 100+id), t0)
			obs.Sessions = append(obs.Sessions, s)
			return id
		}
		writerOf := map[int64]int64{} // waiter → its record's writer
		oneRecord := map[string]bool{}
		for ti := range 1 + r.IntN(3) {
			table := fmt.Sprintf("gm_w%d", ti)
			records := 1 + r.IntN(2)
			oneRecord[table] = records == 1
			for rec := range records {
				w := session(fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", table, rec))
				trxs = append(trxs, Trx{ID: fmt.Sprint("t", w), Thread: w, Started: t0, State: "RUNNING", RowsLocked: 1})
				res := fmt.Sprintf("row:test.%s/%d:3:%d", table, ti+5, rec+2)
				for range 1 + r.IntN(4) {
					z := session(fmt.Sprintf("SELECT v FROM %s WHERE id = %d LOCK IN SHARE MODE", table, rec))
					trxs = append(trxs, Trx{ID: noID, Thread: z, Started: t0, State: "LOCK WAIT"})
					waits = append(waits, Wait{Requesting: noID, Blocking: fmt.Sprint("t", w), Resource: res, Mode: "S", Table: "test." + table})
					writerOf[z] = w
				}
			}
		}
		r.Shuffle(len(waits), func(i, j int) { waits[i], waits[j] = waits[j], waits[i] })
		r.Shuffle(len(trxs), func(i, j int) { trxs[i], trxs[j] = trxs[j], trxs[i] })
		Build(obs, trxs, waits, nil)
		seen := map[int64]bool{}
		for _, u := range obs.Uses {
			if !u.Waiting {
				continue
			}
			seen[u.Session] = true
			var table string
			for _, s := range obs.Sessions {
				if s.ID == u.Session {
					table = strings.Fields(s.Query)[3]
				}
			}
			named := oneRecord[table]
			switch {
			case named && !slices.Equal(u.BlockedBy, []int64{writerOf[u.Session]}):
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): waiter %d on %s blocked by %v, want its writer %d", seed, seed, u.Session, table, u.BlockedBy, writerOf[u.Session])
			case !named && (len(u.BlockedBy) != 0 || u.Why == ""):
				t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): waiter %d on %s (two records) blocked by %v, why %q: want nobody, with a reason", seed, seed, u.Session, table, u.BlockedBy, u.Why)
			}
		}
		if len(seen) != len(writerOf) {
			t.Fatalf("seed %d: %d of %d id-less waiters seen waiting", seed, len(seen), len(writerOf))
		}
	}
}

package locktopo

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The servers a scenario runs on.
const (
	Postgres = "postgres"
	MySQL    = "mysql" // MariaDB
)

// The topologies the generator builds.
const (
	TopoRowQueue    = "row-queue" // one hot row, one holder, 2–30 waiters
	TopoHotRows     = "hot-rows"  // 2–3 hot rows (independent contended objects), a holder each
	TopoChain       = "chain"     // A holds r1; B holds r2 and waits for r1; C… wait for r2 (and longer)
	TopoShareMix    = "share-mix" // 1–3 shared holders, or one exclusive holder, and a mix of shared and exclusive waiters
	TopoDDLQueue    = "ddl-queue" // a reader holds a table; an ALTER queues behind it; later readers behind the ALTER
	TopoDDLNoPlugin = "ddl-queue-nomdl"
	TopoFTWRL       = "ftwrl"    // a long UPDATE; FLUSH TABLES WITH READ LOCK behind it; writers behind the FTWRL (MariaDB)
	TopoAdvisory    = "advisory" // advisory locks sharing an objid: one contended, one not (PostgreSQL)
	TopoOtherDB     = "other-db" // a queue whose root is in another database than the guard's
)

// Topologies returns the topologies of a server, in report order.
func Topologies(server string) []string {
	if server == MySQL {
		return []string{TopoRowQueue, TopoHotRows, TopoChain, TopoShareMix, TopoDDLQueue, TopoDDLNoPlugin, TopoFTWRL, TopoOtherDB}
	}
	return []string{TopoRowQueue, TopoHotRows, TopoChain, TopoShareMix, TopoDDLQueue, TopoAdvisory, TopoOtherDB}
}

// weights are the topologies' relative frequencies: the row queues, the
// commonest pile-up, the most often, so that a CI-sized run of 40 still
// builds most topologies a few times; FTWRL the least, as it stalls every
// write of the shared server while it waits.
var weights = map[string]int{TopoRowQueue: 4, TopoHotRows: 4, TopoChain: 2, TopoShareMix: 2, TopoDDLQueue: 2, TopoDDLNoPlugin: 1, TopoFTWRL: 1, TopoAdvisory: 2, TopoOtherDB: 2}

// The kinds of root holder.
const (
	RootActive    = "active"    // runs a statement: cancellable
	RootIdle      = "idle"      // idle in transaction: actionable only with TerminateIdle
	RootProtUser  = "prot-user" // a protected user (Protection.Users)
	RootProtApp   = "prot-app"  // a protected application (PostgreSQL only)
	RootSuperuser = "superuser" // a superuser account
	RootOtherDB   = "other-db"  // in another database than the guard's
)

// The accounts sessions log in as.
const (
	AcctApp   = "app"   // an ordinary role
	AcctProt  = "prot"  // the role the guard protects
	AcctSuper = "super" // a superuser (PostgreSQL postgres; MariaDB an account with ALL PRIVILEGES ON *.*)
)

// The roles of a session in a scenario: the ground truth.
const (
	RoleRoot      = "root"      // holds a contended lock and waits for nothing
	RoleWaiter    = "waiter"    // waits for a lock (it may hold others)
	RoleBystander = "bystander" // holds an uncontended lock
)

// Session is one client session of a scenario.
type Session struct {
	Account string
	OtherDB bool   // connects to the other database
	App     string // application_name (PostgreSQL)
	Role    string
	Kind    string // a root's kind
	Object  int    // the contended object it holds or waits for (-1: none)
}

// Step is what one session does: Sync statements in order, then Async,
// the statement left running (a sleep, or one that waits for a lock),
// then, once Async returns, After (ROLLBACK, UNLOCK TABLES).
type Step struct {
	Sess  int
	Sync  []string
	Async string
	After []string
	Wait  bool // Async waits for a lock: the runner waits until the server shows it waiting
}

// Scenario is one generated lock situation with its ground truth.
type Scenario struct {
	Seed          uint64
	Server        string
	Topology      string
	Sessions      []Session
	Steps         []Step
	Tables        []string // tables the scenario creates in the scope database (id int primary key, v int, rows 1–10)
	TerminateIdle bool     // the guard may terminate a root idle in transaction
	// NoMDLView: the guard ignores the server's metadata lock views
	// (guard/mysql.WithoutMDLView) and infers a table's holder, which it
	// does only when one session alone can hold it: a table read by
	// several roots has no actionable root then.
	NoMDLView bool
	Skip      string // why the scenario cannot run here (it is counted, not run)
}

// Objects returns, per contended object, the sessions that are its roots.
func (s *Scenario) Objects() map[int][]int {
	m := map[int][]int{}
	for i, ss := range s.Sessions {
		if ss.Role == RoleRoot {
			m[ss.Object] = append(m[ss.Object], i)
		}
	}
	return m
}

// Actionable reports whether the guard may act on session i: a root that
// is neither protected, a superuser, out of scope nor idle (unless the
// guard may terminate idle sessions), nor one of several a metadata lock
// holder would have to be inferred from.
func (s *Scenario) Actionable(i int) bool {
	ss := s.Sessions[i]
	if ss.Role != RoleRoot || s.ambiguous(i) {
		return false
	}
	switch ss.Kind {
	case RootActive:
		return true
	case RootIdle:
		return s.TerminateIdle
	}
	return false
}

// ambiguous reports whether root i is one of several possible holders
// of a metadata lock the guard must infer (NoMDLView).
func (s *Scenario) ambiguous(i int) bool {
	return s.NoMDLView && len(s.Objects()[s.Sessions[i].Object]) > 1
}

// ActionableObjects returns the contended objects whose roots are all
// actionable: the guard must act on each of their roots.
func (s *Scenario) ActionableObjects() []int {
	var out []int
	objs := s.Objects()
	for o := 0; o < len(objs)+8; o++ {
		rs, ok := objs[o]
		if !ok {
			continue
		}
		all := true
		for _, r := range rs {
			all = all && s.Actionable(r)
		}
		if all {
			out = append(out, o)
		}
	}
	return out
}

// String describes the scenario in one line.
func (s *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s seed=%d terminate-idle=%v:", s.Server, s.Topology, s.Seed, s.TerminateIdle)
	for i, ss := range s.Sessions {
		fmt.Fprintf(&b, " s%d=%s", i, ss.Role)
		if ss.Role == RoleRoot {
			fmt.Fprintf(&b, "(%s,o%d)", ss.Kind, ss.Object)
		} else if ss.Object >= 0 {
			fmt.Fprintf(&b, "(o%d)", ss.Object)
		}
	}
	return b.String()
}

// ScenarioSeed is the seed of the i-th scenario of a run of seed base
// (SplitMix64): each scenario replays alone from its own seed.
func ScenarioSeed(base uint64, i int) uint64 {
	z := base + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// gen builds one scenario.
type gen struct {
	r   *rand.Rand
	s   *Scenario
	dia dialect
}

// Generate returns the scenario of seed on server, its ground truth
// known by construction. The same seed always gives the same scenario.
func Generate(server string, seed uint64) *Scenario {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x6c6f636b746f706f)), s: &Scenario{Seed: seed, Server: server}, dia: dialectOf(server)}
	tops := Topologies(server)
	total := 0
	for _, t := range tops {
		total += weights[t]
	}
	n := g.r.IntN(total)
	for _, t := range tops {
		if n -= weights[t]; n < 0 {
			g.s.Topology = t
			break
		}
	}
	g.s.TerminateIdle = g.r.IntN(4) == 0
	switch g.s.Topology {
	case TopoRowQueue:
		g.rowQueues(1)
	case TopoHotRows:
		g.rowQueues(2 + g.r.IntN(2))
	case TopoChain:
		g.chain()
	case TopoShareMix:
		g.shareMix()
	case TopoDDLQueue, TopoDDLNoPlugin:
		g.ddlQueue()
		g.s.NoMDLView = g.s.Topology == TopoDDLNoPlugin
	case TopoFTWRL:
		g.ftwrl()
	case TopoAdvisory:
		g.advisory()
	case TopoOtherDB:
		g.otherDB()
	}
	return g.s
}

// rootKind draws a root's kind.
func (g *gen) rootKind() string {
	kinds := []string{RootActive, RootActive, RootActive, RootIdle, RootProtUser, RootSuperuser}
	if g.s.Server == Postgres {
		kinds = append(kinds, RootProtApp)
	}
	return kinds[g.r.IntN(len(kinds))]
}

// session adds a session and returns its index.
func (g *gen) session(s Session) int {
	g.s.Sessions = append(g.s.Sessions, s)
	return len(g.s.Sessions) - 1
}

// root adds a root of kind on object obj.
func (g *gen) root(kind string, obj int) int {
	s := Session{Account: AcctApp, Role: RoleRoot, Kind: kind, Object: obj}
	switch kind {
	case RootProtUser:
		s.Account = AcctProt
	case RootSuperuser:
		s.Account = AcctSuper
	case RootProtApp:
		s.App = protectedApp
	case RootOtherDB:
		s.OtherDB = true
	}
	return g.session(s)
}

// waiter adds a waiter on object obj.
func (g *gen) waiter(obj int) int {
	acct := AcctApp
	// Waiters of any account: a protected or superuser waiter is still
	// never acted on, and must not make the guard look elsewhere.
	switch g.r.IntN(8) {
	case 0:
		acct = AcctProt
	case 1:
		acct = AcctSuper
	}
	return g.session(Session{Account: acct, Role: RoleWaiter, Object: obj})
}

// hold is the step of a root (or bystander) sess that took its locks with
// stmts: it then sleeps in a statement (active kinds) or stays idle in
// its transaction.
func (g *gen) hold(sess int, stmts ...string) Step {
	st := Step{Sess: sess, Sync: append([]string{"BEGIN"}, stmts...)}
	if g.s.Sessions[sess].Kind != RootIdle {
		st.Async, st.After = g.dia.sleep, []string{"ROLLBACK"}
	}
	return st
}

func (g *gen) table(n int) string {
	for len(g.s.Tables) < n {
		g.s.Tables = append(g.s.Tables, fmt.Sprintf("t%d", len(g.s.Tables)+1))
	}
	return g.s.Tables[n-1]
}

// rowQueues builds k independent row queues: each hot row (on its own
// table or its own id) has a root of a random kind; 2–30 waiters in all,
// interleaved.
func (g *gen) rowQueues(k int) {
	type row struct{ table, id string }
	rows := make([]row, k)
	for i := range rows {
		rows[i] = row{g.table(1 + g.r.IntN(2)), ""}
		rows[i].id = fmt.Sprint(1 + i*3 + g.r.IntN(3))
		st := g.hold(g.root(g.rootKind(), i), fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %s", rows[i].table, rows[i].id))
		g.s.Steps = append(g.s.Steps, st)
	}
	n := max(2, k) + g.r.IntN(31-max(2, k))
	for j := range n {
		i := g.r.IntN(k)
		if j < k {
			i = j // every hot row has a waiter: each is contended
		}
		w := g.waiter(i)
		q := fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %s", rows[i].table, rows[i].id)
		g.s.Steps = append(g.s.Steps, Step{Sess: w, Async: q, Wait: true})
	}
}

// chain builds A → B → … : link k holds row k and waits for row k−1;
// 1–5 waiters wait for the last link's row. Only A is a root.
func (g *gen) chain() {
	t := g.table(1)
	upd := func(id int) string { return fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", t, id) }
	g.s.Steps = append(g.s.Steps, g.hold(g.root(g.rootKind(), 0), upd(1)))
	links := 1 + g.r.IntN(3)
	for k := 2; k <= links+1; k++ {
		w := g.waiter(0)
		g.s.Steps = append(g.s.Steps, Step{Sess: w, Sync: []string{"BEGIN", upd(k)}, Async: upd(k - 1), After: []string{"ROLLBACK"}, Wait: true})
	}
	for range 1 + g.r.IntN(5) {
		w := g.waiter(0)
		g.s.Steps = append(g.s.Steps, Step{Sess: w, Async: upd(links + 1), Wait: true})
	}
}

// shareMix builds 1–3 shared holders of a row (all of one kind: their row
// is freed only when all let go) with exclusive waiters, or one exclusive
// holder with shared and exclusive waiters.
func (g *gen) shareMix() {
	t := g.table(1)
	id := 1 + g.r.IntN(10)
	share := fmt.Sprintf(g.dia.forShare, t, id)
	upd := fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", t, id)
	if g.r.IntN(2) == 0 {
		kind := g.rootKind()
		for range 1 + g.r.IntN(3) {
			g.s.Steps = append(g.s.Steps, g.hold(g.root(kind, 0), share))
		}
		for range 2 + g.r.IntN(10) {
			g.s.Steps = append(g.s.Steps, Step{Sess: g.waiter(0), Async: upd, Wait: true})
		}
		return
	}
	g.s.Steps = append(g.s.Steps, g.hold(g.root(g.rootKind(), 0), upd))
	for range 2 + g.r.IntN(10) {
		q := upd
		if g.r.IntN(2) == 0 {
			q = share
		}
		g.s.Steps = append(g.s.Steps, Step{Sess: g.waiter(0), Sync: []string{"BEGIN"}, Async: q, After: []string{"ROLLBACK"}, Wait: true})
	}
}

// ddlQueue builds a reader (1–2 readers of one kind) holding table d, an
// ALTER TABLE queued behind it, and 1–8 statements queued behind the
// ALTER.
func (g *gen) ddlQueue() {
	d := g.table(3)
	kind := g.rootKind()
	for range 1 + g.r.IntN(2) {
		g.s.Steps = append(g.s.Steps, g.hold(g.root(kind, 0), "SELECT count(*) FROM "+d))
	}
	alter := g.session(Session{Account: AcctSuper, Role: RoleWaiter, Object: 0})
	g.s.Steps = append(g.s.Steps, Step{Sess: alter, Async: fmt.Sprintf("ALTER TABLE %s ADD COLUMN c%d int", d, g.r.IntN(1_000_000)), Wait: true})
	for range 1 + g.r.IntN(8) {
		q := "SELECT count(*) FROM " + d
		if g.r.IntN(3) == 0 {
			q = fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", d, 1+g.r.IntN(10))
		}
		g.s.Steps = append(g.s.Steps, Step{Sess: g.waiter(0), Async: q, Wait: true})
	}
}

// ftwrl builds a long UPDATE (the root), FLUSH TABLES WITH READ LOCK
// behind it, and 1–5 writers behind the FTWRL.
func (g *gen) ftwrl() {
	t1, t2 := g.table(1), g.table(2)
	kinds := []string{RootActive, RootActive, RootProtUser, RootSuperuser}
	r := g.root(kinds[g.r.IntN(len(kinds))], 0)
	g.s.Steps = append(g.s.Steps, Step{Sess: r, Async: fmt.Sprintf("UPDATE %s SET v = v + SLEEP(20) WHERE id = %d", t1, 1+g.r.IntN(10))})
	f := g.session(Session{Account: AcctSuper, Role: RoleWaiter, Object: 0})
	g.s.Steps = append(g.s.Steps, Step{Sess: f, Sync: []string{"SET SESSION lock_wait_timeout = 3"}, Async: "FLUSH TABLES WITH READ LOCK", After: []string{"UNLOCK TABLES"}, Wait: true})
	for range 1 + g.r.IntN(5) {
		g.s.Steps = append(g.s.Steps, Step{Sess: g.waiter(0), Async: fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", t2, 1+g.r.IntN(10)), Wait: true})
	}
}

// advisory builds two advisory locks sharing an objid: (c2, objid) held
// by an older session nobody waits for (a bystander), (c1, objid) held by
// the root with 2–10 waiters.
func (g *gen) advisory() {
	objid := 1 + g.r.IntN(1000)
	c1 := 1 + g.r.IntN(1000)
	c2 := c1 + 1 + g.r.IntN(1000)
	lock := func(c int) string { return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, %d)", c, objid) }
	b := g.session(Session{Account: AcctApp, Role: RoleBystander, Kind: RootActive, Object: -1})
	g.s.Steps = append(g.s.Steps, g.hold(b, lock(c2)))
	g.s.Steps = append(g.s.Steps, g.hold(g.root(g.rootKind(), 0), lock(c1)))
	for range 2 + g.r.IntN(9) {
		g.s.Steps = append(g.s.Steps, Step{Sess: g.waiter(0), Async: lock(c1), Wait: true})
	}
}

// otherDB builds a row queue whose root is in another database than the
// guard's (PostgreSQL: the whole queue is there; MariaDB: the root's
// default database is the other, its row in the guard's).
func (g *gen) otherDB() {
	t := g.table(1)
	id := 1 + g.r.IntN(10)
	r := g.root(RootOtherDB, 0)
	q := fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", t, id)
	rq := q
	if g.s.Server == MySQL {
		rq = fmt.Sprintf("UPDATE %s.%s SET v = v + 1 WHERE id = %d", scopeDBToken, t, id)
	}
	g.s.Steps = append(g.s.Steps, g.hold(r, rq))
	for range 2 + g.r.IntN(10) {
		w := g.waiter(0)
		if g.s.Server == Postgres {
			g.s.Sessions[w].OtherDB = true
		}
		g.s.Steps = append(g.s.Steps, Step{Sess: w, Async: q, Wait: true})
	}
}

// scopeDBToken in a statement is replaced by the scope database's name.
const scopeDBToken = "{scope}"

// protectedApp is the application the guard protects.
const protectedApp = "moirai_locktopo_protected"

// dialect is what differs between the servers' SQL.
type dialect struct {
	sleep    string // a statement that sleeps long
	forShare string // SELECT … FOR SHARE of table %s, id %d
}

func dialectOf(server string) dialect {
	if server == MySQL {
		return dialect{sleep: "SELECT SLEEP(20)", forShare: "SELECT v FROM %s WHERE id = %d LOCK IN SHARE MODE"}
	}
	return dialect{sleep: "SELECT pg_sleep(20)", forShare: "SELECT v FROM %s WHERE id = %d FOR SHARE"}
}

// runName is the prefix of what a run creates: moirai_locktopo_ and a
// random suffix, so two runs never collide.
func runName() string {
	return fmt.Sprintf("moirai_locktopo_%08x", rand.Uint32())
}

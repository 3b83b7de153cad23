package postgres

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/internal/replicas"
)

// TestDocumentedGrants creates the least-privilege role docs/GUARD.md
// documents (and an application's role), connects the guard with a DSN
// naming the database, checks its privileges, and runs an acting guard
// scoped to that database on an incident of the application's sessions:
// it cancels the holder's statement. The roles are the test's own and
// dropped at the end; the guard acts only on the test's sessions.
func TestDocumentedGrants(t *testing.T) {
	server(t)
	table(t, "gr_grants")
	gdsn, adsn, database := documentedRoles(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	src, err := Open(ctx, gdsn)
	if err != nil {
		t.Fatalf("the documented role cannot connect with a DSN naming a database: %v", err)
	}
	defer src.Close()
	info, err := src.Check(ctx)
	if err != nil {
		t.Fatalf("the documented role fails the start-up check: %v", err)
	}
	if info.Superuser {
		t.Fatal("the documented role is a superuser")
	}
	app := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, adsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	h := app()
	hpid := pid(t, h)
	exec(t, h, "BEGIN; SELECT * FROM gr_grants WHERE id = 1 FOR UPDATE")
	bctx, stop := context.WithCancel(ctx)
	held := background(bctx, h, "SELECT pg_sleep(30)")
	mine := map[int64]bool{hpid: true}
	var waits []<-chan error
	for range 3 {
		w := app()
		mine[pid(t, w)] = true
		waits = append(waits, background(bctx, w, "UPDATE gr_grants SET v = v + 1 WHERE id = 1"))
	}
	t.Cleanup(func() { // before the connections close: their statements end first
		stop()
		for _, w := range waits {
			<-w
		}
	})
	g, err := guard.New(&ownSessions{Source: src, mine: mine}, guard.Options{Interval: 100 * time.Millisecond, SLO: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if g.Scope() != database {
		t.Fatalf("scope %q, want the DSN's database %q", g.Scope(), database)
	}
	acted := replicas.UntilActed(ctx, t, g, 100*time.Millisecond, 100)
	if len(acted) != 1 || acted[0].Outcome != guard.OutcomeActed || acted[0].Target.Session != hpid {
		t.Fatalf("decisions %+v: want the holder's statement cancelled by the documented role", acted)
	}
	select {
	case err := <-held:
		if err == nil || !strings.Contains(err.Error(), "canceling statement") {
			t.Fatalf("the holder's pg_sleep ended with %v, want a cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's pg_sleep still runs after the cancel")
	}
}

// documentedGrants returns the PostgreSQL statements of docs/GUARD.md's
// least-privilege section, for the role.
func documentedGrants(t *testing.T, role string) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/GUARD.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Least privilege\n\n```sql\n")
	if !ok {
		t.Fatal("docs/GUARD.md: no PostgreSQL grants block")
	}
	block, _, _ := strings.Cut(rest, "```")
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), ";")); l == "" {
			continue
		}
		l = strings.ReplaceAll(l, "moirai_guard", role)
		l = strings.ReplaceAll(l, "'…'", "'guard-pw'")
		out = append(out, l)
	}
	if len(out) < 2 {
		t.Fatalf("docs/GUARD.md's PostgreSQL block %q: too few statements", block)
	}
	return out
}

// ownSessions carries out only actions on the test's own sessions.
type ownSessions struct {
	guard.Source
	mine map[int64]bool
}

func (o *ownSessions) Database() string { return o.Source.(guard.Scoped).Database() }

func (o *ownSessions) Cancel(ctx context.Context, t guard.Target) error {
	if !o.mine[t.Session] {
		return fmt.Errorf("refused: session %d is not the test's", t.Session)
	}
	return o.Source.Cancel(ctx, t)
}

func (o *ownSessions) Terminate(ctx context.Context, t guard.Target) error {
	if !o.mine[t.Session] {
		return fmt.Errorf("refused: session %d is not the test's", t.Session)
	}
	return o.Source.Terminate(ctx, t)
}

// documentedRoles creates the guard's role with docs/GUARD.md's grants
// and an application's role (dropped when the test ends), and returns
// their DSNs, naming the test's database.
func documentedRoles(t *testing.T) (gdsn, adsn, database string) {
	admin := client(t)
	suffix := fmt.Sprintf("%06d", rand.IntN(1_000_000))
	guardRole, appRole := "moirai_guard_t"+suffix, "moirai_app_t"+suffix
	t.Cleanup(func() {
		cleanup(fmt.Sprintf(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename IN ('%s', '%s');
			DROP OWNED BY %s; DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s`, guardRole, appRole, appRole, appRole, guardRole))
	})
	for _, q := range documentedGrants(t, guardRole) {
		exec(t, admin, q)
	}
	exec(t, admin, fmt.Sprintf("CREATE ROLE %s LOGIN; GRANT SELECT, UPDATE ON gr_grants TO %s", appRole, appRole))
	cfg, err := pgx.ParseConfig(dsn())
	if err != nil {
		t.Fatal(err)
	}
	gdsn = fmt.Sprintf("postgres://%s:guard-pw@%s:%d/%s?sslmode=disable", guardRole, cfg.Host, cfg.Port, cfg.Database)
	adsn = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", appRole, cfg.Host, cfg.Port, cfg.Database)
	return gdsn, adsn, cfg.Database
}

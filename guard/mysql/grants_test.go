package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/internal/replicas"
)

// TestDocumentedGrants creates the least-privilege account docs/GUARD.md
// documents (and an application's account), connects the guard with a
// DSN naming the database, checks its privileges, and runs an acting
// guard scoped to that database on an incident of the application's
// sessions: it cancels the holder's statement. The accounts are the
// test's own and dropped at the end; the guard acts only on the test's
// sessions.
func TestDocumentedGrants(t *testing.T) {
	_, db, ctx := server(t)
	table(t, ctx, db, "gr_grants")
	suffix := fmt.Sprintf("%06d", rand.IntN(1_000_000))
	guardUser, appUser := "moirai_guard_t"+suffix, "moirai_app_t"+suffix
	t.Cleanup(func() { dropAccounts(db, guardUser, appUser) })
	// The grants of docs/GUARD.md, word for word but the account.
	for _, q := range documentedGrants(t, guardUser) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'app-pw'", appUser),
		fmt.Sprintf("GRANT SELECT, UPDATE ON test.gr_grants TO '%s'@'%%'", appUser),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src, err := Open(ctx, fmt.Sprintf("mysql://%s:guard-pw@tcp(127.0.0.1:3306)/test", guardUser))
	if err != nil {
		t.Fatalf("the documented account cannot connect with a DSN naming a database: %v", err)
	}
	defer src.Close()
	info, err := src.Check(ctx)
	if err != nil {
		t.Fatalf("the documented account fails the start-up check: %v", err)
	}
	if info.Superuser {
		t.Fatal("the documented account is a superuser")
	}
	// The application's incident: a holder runs SLEEP in its transaction
	// while three UPDATEs wait for its row.
	cfg, _ := ParseDSN(fmt.Sprintf("mysql://%s:app-pw@tcp(127.0.0.1:3306)/test", appUser))
	appDB, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { appDB.Close() })
	app := func() *session { return newSession(t, ctx, appDB) }
	h := app()
	h.exec(t, ctx, "BEGIN")
	h.exec(t, ctx, "SELECT * FROM gr_grants WHERE id = 1 FOR UPDATE")
	held := h.background(ctx, "SELECT SLEEP(30)")
	mine := map[int64]bool{h.id: true}
	for range 3 {
		w := app()
		mine[w.id] = true
		w.background(ctx, "UPDATE gr_grants SET v = v + 1 WHERE id = 1")
	}
	rec := &ownSessions{Source: src, mine: mine}
	g, err := guard.New(rec, guard.Options{Interval: 250 * time.Millisecond, SLO: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if g.Scope() != "test" {
		t.Fatalf("scope %q, want the DSN's database", g.Scope())
	}
	acted := replicas.UntilActed(ctx, t, g, 250*time.Millisecond, 40)
	if len(acted) != 1 || acted[0].Outcome != guard.OutcomeActed || acted[0].Target.Session != h.id {
		t.Fatalf("decisions %+v: want the holder's statement cancelled by the documented account", acted)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's SLEEP still runs after the cancel")
	}
}

// documentedGrants returns the MariaDB statements of docs/GUARD.md's
// least-privilege section, for the account user.
func documentedGrants(t *testing.T, user string) []string {
	t.Helper()
	doc, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(doc, "MariaDB:\n\n```sql\n")
	if !ok {
		t.Fatal("docs/GUARD.md: no MariaDB grants block")
	}
	block, _, _ := strings.Cut(rest, "```")
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), ";")); l == "" {
			continue
		}
		l = strings.ReplaceAll(l, "'moirai_guard'", "'"+user+"'")
		l = strings.ReplaceAll(l, "'…'", "'guard-pw'")
		out = append(out, l)
	}
	if len(out) < 3 {
		t.Fatalf("docs/GUARD.md's MariaDB block %q: too few statements", block)
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

// readDoc reads docs/GUARD.md.
func readDoc() (string, error) {
	b, err := os.ReadFile("../../docs/GUARD.md")
	return string(b), err
}

// dropAccounts ends the accounts' sessions (the test's own) and drops
// them.
func dropAccounts(db *sql.DB, users ...string) {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, u := range users {
		rows, err := db.QueryContext(c, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", u)
		if err == nil {
			var ids []int64
			for rows.Next() {
				var id int64
				if rows.Scan(&id) == nil {
					ids = append(ids, id)
				}
			}
			rows.Close()
			for _, id := range ids {
				db.ExecContext(c, fmt.Sprintf("KILL CONNECTION %d", id))
			}
		}
		db.ExecContext(c, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", u))
	}
}

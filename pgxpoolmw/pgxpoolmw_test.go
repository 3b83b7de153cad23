package pgxpoolmw_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/pgxpoolmw"
	"github.com/moirai-go/moirai/snapshot"
)

const dsn = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&application_name=moirai_leastloss_pgxpoolmw"

// pool opens a pool of size connections on the local server through
// Configure, or skips the test when there is no server (fails under
// CI=true).
func pool(t *testing.T, ctl *moirai.Controller, size int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = size
	if err := pgxpoolmw.Configure(ctl, "db-pool", cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = p.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Skipf("no PostgreSQL at 127.0.0.1:5432: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func until(t *testing.T, ctl *moirai.Controller, what string, cond func(*snapshot.Snapshot) bool) {
	t.Helper()
	for range 5000 {
		if cond(ctl.Snapshot()) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never saw %s", what)
}

func usage(s *snapshot.Snapshot, id uint64) (held int64, waiting int32) {
	if i := s.TaskByID(id); i >= 0 {
		for _, u := range s.UsageOf(i) {
			held += u.Held
			waiting += u.Waiting
		}
	}
	return held, waiting
}

// One task holds the pool's only connection; another's pool.Exec waits for
// it, then holds it; every hold is released.
func TestPoolHoldsAndWaits(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	p := pool(t, ctl, 1)
	ctxA, a := ctl.Begin(context.Background(), moirai.Spec{Class: "report"})
	conn, err := p.Acquire(ctxA)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := usage(ctl.Snapshot(), a.ID()); h != 1 {
		t.Fatalf("the acquiring task holds %d, want 1", h)
	}
	ctxB, b := ctl.Begin(context.Background(), moirai.Spec{Class: "light"})
	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctxB, "SELECT 1")
		done <- err
	}()
	until(t, ctl, "the second task waiting", func(s *snapshot.Snapshot) bool { _, w := usage(s, b.ID()); return w == 1 })
	conn.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.End(nil)
	a.End(nil)
	s := ctl.Snapshot()
	r := s.ResourceByName("db-pool")
	if r < 0 || s.Resources[r].Held != 0 || s.Resources[r].Waits < 2 || s.Resources[r].Capacity != 1 {
		t.Fatalf("pool resource: %+v", s.Resources[r])
	}
	if st := ctl.Stats(); st.BadEvents != 0 {
		t.Errorf("bad events %d", st.BadEvents)
	}
}

func TestConfigureErrors(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	if err := pgxpoolmw.Configure(ctl, "db", nil); err == nil {
		t.Error("nil config accepted")
	}
	cfg, _ := pgxpool.ParseConfig(dsn)
	if err := pgxpoolmw.Configure(ctl, "db", cfg); err != nil {
		t.Fatal(err)
	}
	if err := pgxpoolmw.Configure(ctl, "db", cfg); err == nil {
		t.Error("a second pool of the same name accepted")
	}
}

package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPoll measures one poll of a server with 200 client
// connections: 150 idle, 30 in transactions holding row locks, 20
// waiting for those locks. server_ms/op is the server-side time of the
// poll's statements (clock_timestamp() before and after); the issue's
// target is at most 5 ms. The server must allow 200 more connections
// (scripts/db-setup.sh raises max_connections to 300).
func BenchmarkPoll(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, dsn())
	if err != nil {
		b.Skipf("no PostgreSQL server at %s: %v", dsn(), err)
	}
	defer s.Close()
	var conns []*pgx.Conn
	defer func() {
		// The transactions end with their connections, then the table
		// can go.
		for _, c := range conns {
			c.Close(context.Background())
		}
		if c, err := pgx.Connect(context.Background(), dsn()); err == nil {
			_, _ = c.Exec(context.Background(), "DROP TABLE IF EXISTS gp_bench")
			c.Close(context.Background())
		}
	}()
	open := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn())
		if err != nil {
			b.Fatalf("connection %d: %v (scripts/db-setup.sh raises max_connections)", len(conns), err)
		}
		conns = append(conns, c)
		return c
	}
	admin := open()
	if _, err := admin.Exec(ctx, "DROP TABLE IF EXISTS gp_bench; CREATE TABLE gp_bench (id int PRIMARY KEY, v int); INSERT INTO gp_bench SELECT g, 0 FROM generate_series(1, 1000) g"); err != nil {
		b.Fatal(err)
	}
	for range 149 {
		open()
	}
	for i := range 30 {
		c := open()
		if _, err := c.Exec(ctx, fmt.Sprintf("BEGIN; UPDATE gp_bench SET v = 1 WHERE id = %d", i+1)); err != nil {
			b.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range 20 {
		c := open()
		go func() { _, _ = c.Exec(wctx, fmt.Sprintf("UPDATE gp_bench SET v = 2 WHERE id = %d", i+1)) }()
	}
	time.Sleep(time.Second) // let the waiters queue
	var server time.Duration
	var sessions, uses int
	b.ResetTimer()
	for b.Loop() {
		obs, err := s.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		server += obs.ServerTime
		sessions, uses = len(obs.Sessions), len(obs.Uses)
	}
	b.StopTimer()
	b.ReportMetric(float64(server)/float64(b.N)/1e6, "server_ms/op")
	b.ReportMetric(float64(sessions), "sessions")
	b.ReportMetric(float64(uses), "uses")
	cancel()
}

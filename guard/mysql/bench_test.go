package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkPoll measures one poll of a server with 200 client
// connections: 150 idle, 30 in transactions holding row locks, 20
// waiting for them. MariaDB reports no server time per statement:
// server_ms/op is the server's clock from the poll's first statement to
// its last, an upper bound that includes the round trips between them. The server must allow 200 more connections
// (scripts/db-setup.sh).
func BenchmarkPoll(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, dsn())
	if err != nil {
		b.Skipf("no MariaDB server at %s: %v", dsn(), err)
	}
	defer s.Close()
	if _, err := s.Check(ctx); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn(), "mysql://"))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxIdleConns(250)
	defer func() {
		db.Close()
		_, _ = s.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS gm_bench")
	}()
	if _, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS gm_bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE gm_bench (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO gm_bench SELECT seq, 0 FROM seq_1_to_1000"); err != nil {
		b.Fatal(err)
	}
	var conns []*sql.Conn
	for i := range 200 {
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatalf("connection %d: %v (scripts/db-setup.sh raises max_connections)", i, err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 30 {
		c := conns[150+i]
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, fmt.Sprintf("UPDATE gm_bench SET v = 1 WHERE id = %d", i+1)); err != nil {
			b.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range 20 {
		c := conns[180+i]
		go func() { _, _ = c.ExecContext(wctx, fmt.Sprintf("UPDATE gm_bench SET v = 2 WHERE id = %d", i+1)) }()
	}
	time.Sleep(time.Second)
	var sessions, uses int
	var server time.Duration
	b.ResetTimer()
	for b.Loop() {
		obs, err := s.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sessions, uses = len(obs.Sessions), len(obs.Uses)
		server += obs.ServerTime
	}
	b.StopTimer()
	b.ReportMetric(float64(server)/float64(b.N)/1e6, "server_ms/op")
	b.ReportMetric(float64(sessions), "sessions")
	b.ReportMetric(float64(uses), "uses")
	cancel()
	for _, c := range conns[150:] {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
	}
}

package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPoll200 polls a server with 200 extra client connections, 20 of
// them running a statement, and reports the poll's wall and server time.
// Run it under flock /work/.heavy.lock.
func BenchmarkPoll200(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := Open(ctx, dsn())
	if err != nil {
		b.Skipf("no MariaDB: %v", err)
	}
	defer src.Close()
	cfg, _ := ParseDSN(dsn())
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(220)
	var conns []*sql.Conn
	var ids []int64
	done := make(chan struct{}, 20)
	for i := range 200 {
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		var id int64
		c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
		ids = append(ids, id)
		if i < 20 {
			go func() { c.ExecContext(ctx, "SELECT SLEEP(300)"); done <- struct{}{} }()
		}
	}
	defer func() {
		for _, id := range ids[:20] {
			src.db.ExecContext(context.Background(), fmt.Sprintf("KILL QUERY %d", id))
		}
		for range 20 {
			<-done
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the sleepers start
	var server time.Duration
	var sessions int
	b.ResetTimer()
	for b.Loop() {
		obs, err := src.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		server += obs.ServerTime
		sessions = len(obs.Sessions)
	}
	b.ReportMetric(float64(server.Microseconds())/1000/float64(b.N), "server-ms/poll")
	b.ReportMetric(float64(sessions), "sessions")
}

package pgxpoolmw_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// recorder is a tracer configured before Configure: it records the name
// of every trace it receives.
type recorder struct{ got []string }

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.got = append(r.got, "QueryStart")
	return ctx
}
func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {
	r.got = append(r.got, "QueryEnd")
}
func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.got = append(r.got, "BatchStart")
	return ctx
}
func (r *recorder) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	r.got = append(r.got, "BatchQuery")
}
func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	r.got = append(r.got, "BatchEnd")
}
func (r *recorder) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	r.got = append(r.got, "CopyFromStart")
	return ctx
}
func (r *recorder) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {
	r.got = append(r.got, "CopyFromEnd")
}
func (r *recorder) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.got = append(r.got, "PrepareStart")
	return ctx
}
func (r *recorder) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {
	r.got = append(r.got, "PrepareEnd")
}
func (r *recorder) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	r.got = append(r.got, "ConnectStart")
	return ctx
}
func (r *recorder) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {
	r.got = append(r.got, "ConnectEnd")
}
func (r *recorder) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	r.got = append(r.got, "AcquireStart")
	return ctx
}
func (r *recorder) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) {
	r.got = append(r.got, "AcquireEnd")
}
func (r *recorder) TraceRelease(*pgxpool.Pool, pgxpool.TraceReleaseData) {
	r.got = append(r.got, "Release")
}

// traceAll calls every trace of tr once, in the order of want below.
func traceAll(ctx context.Context, tr pgx.QueryTracer) {
	tr.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{})
	tr.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{})
	b := tr.(pgx.BatchTracer)
	b.TraceBatchStart(ctx, nil, pgx.TraceBatchStartData{})
	b.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{})
	b.TraceBatchEnd(ctx, nil, pgx.TraceBatchEndData{})
	c := tr.(pgx.CopyFromTracer)
	c.TraceCopyFromStart(ctx, nil, pgx.TraceCopyFromStartData{})
	c.TraceCopyFromEnd(ctx, nil, pgx.TraceCopyFromEndData{})
	p := tr.(pgx.PrepareTracer)
	p.TracePrepareStart(ctx, nil, pgx.TracePrepareStartData{})
	p.TracePrepareEnd(ctx, nil, pgx.TracePrepareEndData{})
	n := tr.(pgx.ConnectTracer)
	n.TraceConnectStart(ctx, pgx.TraceConnectStartData{})
	n.TraceConnectEnd(ctx, pgx.TraceConnectEndData{})
	a := tr.(pgxpool.AcquireTracer)
	a.TraceAcquireStart(ctx, nil, pgxpool.TraceAcquireStartData{})
	a.TraceAcquireEnd(ctx, nil, pgxpool.TraceAcquireEndData{})
	tr.(pgxpool.ReleaseTracer).TraceRelease(nil, pgxpool.TraceReleaseData{})
}

// The tracer configured before receives every trace it implements; one
// that implements some, or none, leaves the others to the Tracer alone.
func TestTracerPassesOn(t *testing.T) {
	want := []string{"QueryStart", "QueryEnd", "BatchStart", "BatchQuery", "BatchEnd", "CopyFromStart", "CopyFromEnd",
		"PrepareStart", "PrepareEnd", "ConnectStart", "ConnectEnd", "AcquireStart", "AcquireEnd", "Release"}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	for i, before := range []pgx.QueryTracer{&recorder{}, queryOnly{&recorder{}}, nil} {
		want := want
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Tracer = before
		if err := pgxpoolmw.Configure(ctl, fmt.Sprintf("db%d", i), cfg); err != nil {
			t.Fatal(err)
		}
		traceAll(context.Background(), cfg.ConnConfig.Tracer)
		var got []string
		switch r := before.(type) {
		case *recorder:
			got = r.got
		case queryOnly:
			got, want = r.r.got, want[:2]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) && before != nil {
			t.Errorf("%T received %v, want %v", before, got, want)
		}
	}
}

// queryOnly is a tracer of queries only.
type queryOnly struct{ r *recorder }

func (q queryOnly) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return q.r.TraceQueryStart(ctx, c, d)
}
func (q queryOnly) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	q.r.TraceQueryEnd(ctx, c, d)
}

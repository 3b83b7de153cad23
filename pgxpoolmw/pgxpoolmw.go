// Package pgxpoolmw makes a pgx connection pool (pgxpool) a moirai
// resource: every acquisition of a connection, by pool.Query, pool.Exec,
// pool.Begin or pool.Acquire alike, is seen as the wait for and the hold
// of one unit of a Queue resource by the task in the call's context. The
// controller then sees which task holds how many of the pool's
// connections and who waits for one: a report fanning out over most of
// the pool is a candidate for cancellation like any other holder.
//
// It is a module of its own, so that the core module does not require pgx.
// Its go.mod replaces the core module by the repository's root.
//
// # How
//
// pgxpool calls the connection config's tracer at the start and the end of
// every acquisition (with the caller's context) and at every release.
// [Configure] registers the resource and installs a tracer that turns these
// into the resource's WaitBegin, WaitEnd and Acquire, and Release; the
// tracer already configured, if any, keeps receiving everything it traces.
//
// # Usage
//
//	cfg, err := pgxpool.ParseConfig(dsn)
//	…
//	if err := pgxpoolmw.Configure(ctl, "db-pool", cfg); err != nil { … }
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
package pgxpoolmw

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/moirai-go/moirai"
)

// Configure registers a Queue resource of ctl called name, of capacity
// cfg.MaxConns, and installs on cfg the tracer that accounts the pool's
// connections to it. It returns an error, leaving cfg unchanged, if the
// name is taken or cfg is nil.
func Configure(ctl *moirai.Controller, name string, cfg *pgxpool.Config) error {
	if cfg == nil || cfg.ConnConfig == nil {
		return fmt.Errorf("pgxpoolmw: nil config")
	}
	res, err := ctl.Register(name, moirai.KindQueue, int64(max(cfg.MaxConns, 1)))
	if err != nil {
		return fmt.Errorf("pgxpoolmw: %w", err)
	}
	cfg.ConnConfig.Tracer = &Tracer{res: res, next: cfg.ConnConfig.Tracer}
	return nil
}

// Tracer is the pool tracer [Configure] installs. Its zero value is not
// usable.
type Tracer struct {
	res  *moirai.Resource
	next pgx.QueryTracer
	// holders maps each connection handed over to the context of the
	// call that acquired it, until its release.
	holders sync.Map
}

// Resource returns the pool's resource.
func (t *Tracer) Resource() *moirai.Resource { return t.res }

// TraceAcquireStart marks the caller's task as waiting for a connection.
func (t *Tracer) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, data pgxpool.TraceAcquireStartData) context.Context {
	t.res.WaitBegin(ctx)
	if n, ok := t.next.(pgxpool.AcquireTracer); ok {
		ctx = n.TraceAcquireStart(ctx, pool, data)
	}
	return ctx
}

// TraceAcquireEnd ends the wait and, when a connection was handed over,
// makes the caller's task its holder.
func (t *Tracer) TraceAcquireEnd(ctx context.Context, pool *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	t.res.WaitEnd(ctx)
	if data.Err == nil && data.Conn != nil {
		if old, loaded := t.holders.Swap(data.Conn, ctx); loaded {
			_ = t.res.Release(old.(context.Context), 1) // never released: not counted twice
		}
		_ = t.res.Acquire(ctx, 1)
	}
	if n, ok := t.next.(pgxpool.AcquireTracer); ok {
		n.TraceAcquireEnd(ctx, pool, data)
	}
}

// TraceRelease releases the connection's hold by the task that acquired
// it.
func (t *Tracer) TraceRelease(pool *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	if ctx, ok := t.holders.LoadAndDelete(data.Conn); ok {
		_ = t.res.Release(ctx.(context.Context), 1)
	}
	if n, ok := t.next.(pgxpool.ReleaseTracer); ok {
		n.TraceRelease(pool, data)
	}
}

// TraceQueryStart passes the call on to the tracer configured before.
func (t *Tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if t.next != nil {
		return t.next.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

// TraceQueryEnd passes the call on to the tracer configured before.
func (t *Tracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if t.next != nil {
		t.next.TraceQueryEnd(ctx, conn, data)
	}
}

// TraceBatchStart passes the call on to the tracer configured before.
func (t *Tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		return n.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

// TraceBatchQuery passes the call on to the tracer configured before.
func (t *Tracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		n.TraceBatchQuery(ctx, conn, data)
	}
}

// TraceBatchEnd passes the call on to the tracer configured before.
func (t *Tracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		n.TraceBatchEnd(ctx, conn, data)
	}
}

// TraceCopyFromStart passes the call on to the tracer configured before.
func (t *Tracer) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	if n, ok := t.next.(pgx.CopyFromTracer); ok {
		return n.TraceCopyFromStart(ctx, conn, data)
	}
	return ctx
}

// TraceCopyFromEnd passes the call on to the tracer configured before.
func (t *Tracer) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromEndData) {
	if n, ok := t.next.(pgx.CopyFromTracer); ok {
		n.TraceCopyFromEnd(ctx, conn, data)
	}
}

// TracePrepareStart passes the call on to the tracer configured before.
func (t *Tracer) TracePrepareStart(ctx context.Context, conn *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	if n, ok := t.next.(pgx.PrepareTracer); ok {
		return n.TracePrepareStart(ctx, conn, data)
	}
	return ctx
}

// TracePrepareEnd passes the call on to the tracer configured before.
func (t *Tracer) TracePrepareEnd(ctx context.Context, conn *pgx.Conn, data pgx.TracePrepareEndData) {
	if n, ok := t.next.(pgx.PrepareTracer); ok {
		n.TracePrepareEnd(ctx, conn, data)
	}
}

// TraceConnectStart passes the call on to the tracer configured before.
func (t *Tracer) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	if n, ok := t.next.(pgx.ConnectTracer); ok {
		return n.TraceConnectStart(ctx, data)
	}
	return ctx
}

// TraceConnectEnd passes the call on to the tracer configured before.
func (t *Tracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	if n, ok := t.next.(pgx.ConnectTracer); ok {
		n.TraceConnectEnd(ctx, data)
	}
}

var (
	_ pgx.QueryTracer       = (*Tracer)(nil)
	_ pgx.BatchTracer       = (*Tracer)(nil)
	_ pgx.CopyFromTracer    = (*Tracer)(nil)
	_ pgx.PrepareTracer     = (*Tracer)(nil)
	_ pgx.ConnectTracer     = (*Tracer)(nil)
	_ pgxpool.AcquireTracer = (*Tracer)(nil)
	_ pgxpool.ReleaseTracer = (*Tracer)(nil)
)

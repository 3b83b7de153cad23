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
	"github.com/jackc/pgx/v5/multitracer"
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
	cfg.ConnConfig.Tracer = &Tracer{res: res, next: nextOf(cfg.ConnConfig.Tracer)}
	return nil
}

// Tracer is the pool tracer [Configure] installs. It accounts the pool's
// acquisitions and releases, and passes every trace on to the tracer
// configured before, if any, as far as that one implements it: its
// methods besides those listed here (TraceQueryStart, TraceBatchStart and
// the others of pgx's tracer interfaces) are those of pgx's
// [multitracer.Tracer], promoted through an unexported field. Its zero
// value is not usable.
type Tracer struct {
	res *moirai.Resource
	next
	// holders maps each connection handed over to the context of the
	// call that acquired it, until its release.
	holders sync.Map
}

// next is the tracer configured before, as pgx's multitracer splits it
// by interface: a trace it does not implement goes to no one.
type next struct{ *multitracer.Tracer }

func nextOf(t pgx.QueryTracer) next {
	if t == nil {
		return next{multitracer.New()}
	}
	return next{multitracer.New(t)}
}

// Resource returns the pool's resource.
func (t *Tracer) Resource() *moirai.Resource { return t.res }

// TraceAcquireStart marks the caller's task as waiting for a connection.
func (t *Tracer) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, data pgxpool.TraceAcquireStartData) context.Context {
	t.res.WaitBegin(ctx)
	return t.next.TraceAcquireStart(ctx, pool, data)
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
	t.next.TraceAcquireEnd(ctx, pool, data)
}

// TraceRelease releases the connection's hold by the task that acquired
// it.
func (t *Tracer) TraceRelease(pool *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	if ctx, ok := t.holders.LoadAndDelete(data.Conn); ok {
		_ = t.res.Release(ctx.(context.Context), 1)
	}
	t.next.TraceRelease(pool, data)
}

var _ interface {
	pgx.QueryTracer
	pgx.BatchTracer
	pgx.CopyFromTracer
	pgx.PrepareTracer
	pgx.ConnectTracer
	pgxpool.AcquireTracer
	pgxpool.ReleaseTracer
} = (*Tracer)(nil)

// Package sqlmw makes a database/sql connection pool a moirai resource, so
// the controller sees which task holds how many connections, and, through
// [DB], which task waits for one: the shape where one report fanning out
// over most of the pool starves every short query.
//
// # How
//
// [Connector] wraps a driver.Connector. database/sql hands a pooled
// connection to a query by calling the driver's ResetSession with the
// query's context (or Connect, for a new connection) and takes it back by
// calling IsValid: the wrapper turns the first into an acquisition of one
// unit of a Queue resource by the task in that context and the second into
// its release (closing a connection releases it too). Every query of the
// pool is seen holding its connection, whoever issued it.
//
// The wait for a connection happens inside database/sql, before the driver
// is called: only [DB]'s methods, which mark the wait before asking the
// pool and end it when the connection is handed over, make it visible
// (every call counts a wait, however short; a queue's contention is the
// time waited). A query made on the *sql.DB directly is seen holding, not
// waiting. A connection the pool opens in the background for a waiting
// query (database/sql's connection opener) is seen held from its second
// hand-over.
//
// # Usage
//
//	pool := sqlmw.Open(ctl, "db-pool", connector, 10) // at most 10 connections
//	defer pool.Close()
//	rows, err := pool.QueryContext(ctx, "SELECT …") // ctx: the request's task
package sqlmw

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"

	"github.com/moirai-go/moirai"
)

// Connector returns c wrapped so that connections held by tasks of ctl
// are accounted to res, a Queue resource of ctl whose capacity should be
// the pool's maximum of open connections.
func Connector(res *moirai.Resource, c driver.Connector) driver.Connector {
	return &connector{res: res, inner: c}
}

type connector struct {
	res   *moirai.Resource
	inner driver.Connector
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	w := &conn{res: c.res, inner: dc}
	w.acquire(ctx)
	return w, nil
}

func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

// conn is a pooled connection: held by the task in holder between its
// hand-over (Connect, ResetSession) and its return (IsValid, Close).
type conn struct {
	res   *moirai.Resource
	inner driver.Conn

	mu     sync.Mutex
	holder context.Context // nil when in the pool
}

func (c *conn) acquire(ctx context.Context) {
	waited(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holder != nil {
		_ = c.res.Release(c.holder, 1)
	}
	c.holder = ctx
	_ = c.res.Acquire(ctx, 1)
}

func (c *conn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holder != nil {
		_ = c.res.Release(c.holder, 1)
		c.holder = nil
	}
}

// ResetSession is called when the pool hands the connection over again.
func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		if err := r.ResetSession(ctx); err != nil {
			return err
		}
	}
	c.acquire(ctx)
	return nil
}

// IsValid is called when the connection goes back to the pool.
func (c *conn) IsValid() bool {
	c.release()
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) Close() error {
	c.release()
	return c.inner.Close()
}

func (c *conn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

// Begin is driver.Conn's: the fallback database/sql uses for a driver
// without ConnBeginTx.
func (c *conn) Begin() (driver.Tx, error) {
	//lint:ignore SA1019 driver.Conn requires it
	return c.inner.Begin()
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.ReadOnly || opts.Isolation != 0 {
		return nil, fmt.Errorf("sqlmw: the driver does not support transaction options")
	}
	//lint:ignore SA1019 the fallback database/sql itself uses
	return c.inner.Begin()
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.inner.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.inner.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *conn) CheckNamedValue(v *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

var _ driver.Connector = (*connector)(nil)
var _ interface {
	driver.SessionResetter
	driver.Validator
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.NamedValueChecker
} = (*conn)(nil)

// waitKey marks a context whose task waits for a connection.
type waitKey struct{}

type waiting struct {
	res  *moirai.Resource
	once sync.Once
}

// wait marks ctx's task as waiting for a connection of res and returns the
// context to ask the pool with and the function that ends the wait if the
// connection was not handed over (an error before any).
func wait(ctx context.Context, res *moirai.Resource) (context.Context, func()) {
	w := &waiting{res: res}
	res.WaitBegin(ctx)
	ctx = context.WithValue(ctx, waitKey{}, w)
	return ctx, func() { w.end(ctx) }
}

func (w *waiting) end(ctx context.Context) { w.once.Do(func() { w.res.WaitEnd(ctx) }) }

// waited ends the wait marked in ctx, if any: the connection is handed
// over.
func waited(ctx context.Context) {
	if w, ok := ctx.Value(waitKey{}).(*waiting); ok {
		w.end(ctx)
	}
}

// DB is a *sql.DB opened on a [Connector] whose query methods also mark
// the wait for a connection. Methods not redefined here (Stats, SetMax…)
// are the embedded *sql.DB's.
type DB struct {
	*sql.DB
	res *moirai.Resource
}

// Open opens a pool of at most size connections (db.SetMaxOpenConns) on c,
// accounted to a new Queue resource of ctl called name. It returns an
// error if the name is taken or size < 1.
func Open(ctl *moirai.Controller, name string, c driver.Connector, size int) (*DB, error) {
	if size < 1 {
		return nil, fmt.Errorf("sqlmw: pool %q of size %d", name, size)
	}
	res, err := ctl.Register(name, moirai.KindQueue, int64(size))
	if err != nil {
		return nil, fmt.Errorf("sqlmw: %w", err)
	}
	db := sql.OpenDB(Connector(res, c))
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	return &DB{DB: db, res: res}, nil
}

// Resource returns the pool's resource.
func (db *DB) Resource() *moirai.Resource { return db.res }

// QueryContext is sql.DB.QueryContext, its wait for a connection seen.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx, done := wait(ctx, db.res)
	defer done()
	return db.DB.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.DB.QueryRowContext, its wait for a connection
// seen.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx, done := wait(ctx, db.res)
	defer done()
	return db.DB.QueryRowContext(ctx, query, args...)
}

// ExecContext is sql.DB.ExecContext, its wait for a connection seen.
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, done := wait(ctx, db.res)
	defer done()
	return db.DB.ExecContext(ctx, query, args...)
}

// BeginTx is sql.DB.BeginTx, its wait for a connection seen; the
// connection is held until Commit or Rollback.
func (db *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	ctx, done := wait(ctx, db.res)
	defer done()
	return db.DB.BeginTx(ctx, opts)
}

// Conn is sql.DB.Conn, its wait for a connection seen; the connection is
// held until its Close.
func (db *DB) Conn(ctx context.Context) (*sql.Conn, error) {
	ctx, done := wait(ctx, db.res)
	defer done()
	return db.DB.Conn(ctx)
}

package sqlmw_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/sqlmw"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a driver whose queries block until released.
type fake struct{ release chan struct{} }

func (f *fake) Connect(context.Context) (driver.Conn, error) { return &fakeConn{f}, nil }
func (f *fake) Driver() driver.Driver                        { return nil }

type fakeConn struct{ f *fake }

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("no tx") }
func (c *fakeConn) ExecContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Result, error) {
	select {
	case <-c.f.release:
		return driver.RowsAffected(1), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (c *fakeConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return emptyRows{}, nil
}

type emptyRows struct{}

func (emptyRows) Columns() []string         { return nil }
func (emptyRows) Close() error              { return nil }
func (emptyRows) Next([]driver.Value) error { return io.EOF }

// until polls the controller's snapshot until cond holds (at most 5 s).
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
	i := s.TaskByID(id)
	if i < 0 {
		return 0, 0
	}
	for _, u := range s.UsageOf(i) {
		held += u.Held
		waiting += u.Waiting
	}
	return held, waiting
}

// A task's query holds a connection of the pool; a second task's query
// waits for it while the pool is full; both are released at the end.
func TestPoolHoldsAndWaits(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	f := &fake{release: make(chan struct{})}
	db, err := sqlmw.Open(ctl, "db", f, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := func(tk *moirai.Task, ctx context.Context, done chan<- error) {
		_, err := db.ExecContext(ctx, "UPDATE t")
		tk.End(err)
		done <- err
	}
	ctx1, t1 := ctl.Begin(context.Background(), moirai.Spec{Class: "report"})
	ctx2, t2 := ctl.Begin(context.Background(), moirai.Spec{Class: "light"})
	d1, d2 := make(chan error, 1), make(chan error, 1)
	go run(t1, ctx1, d1)
	until(t, ctl, "the first task holding the connection", func(s *snapshot.Snapshot) bool { h, _ := usage(s, t1.ID()); return h == 1 })
	go run(t2, ctx2, d2)
	until(t, ctl, "the second task waiting", func(s *snapshot.Snapshot) bool { _, w := usage(s, t2.ID()); return w == 1 })
	f.release <- struct{}{}
	if err := <-d1; err != nil {
		t.Fatal(err)
	}
	until(t, ctl, "the second task holding", func(s *snapshot.Snapshot) bool { h, w := usage(s, t2.ID()); return h == 1 && w == 0 })
	f.release <- struct{}{}
	if err := <-d2; err != nil {
		t.Fatal(err)
	}
	s := ctl.Snapshot()
	r := s.ResourceByName("db")
	if r < 0 || s.Resources[r].Held != 0 || s.Resources[r].Waits != 2 || s.Resources[r].Capacity != 1 {
		t.Fatalf("resource after both: %+v", s.Resources[r])
	}
	if st := ctl.Stats(); st.BadEvents != 0 {
		t.Errorf("bad events %d", st.BadEvents)
	}
	// A query made on the *sql.DB directly still holds its connection.
	ctx3, t3 := ctl.Begin(context.Background(), moirai.Spec{Class: "direct"})
	rows, err := db.DB.QueryContext(ctx3, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := usage(ctl.Snapshot(), t3.ID()); h != 1 {
		t.Errorf("direct query holds %d connection(s), want 1", h)
	}
	rows.Close()
	t3.End(nil)
}

func TestOpenErrors(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	if _, err := sqlmw.Open(ctl, "db", &fake{}, 0); err == nil {
		t.Error("size 0 accepted")
	}
	db, err := sqlmw.Open(ctl, "db", &fake{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlmw.Open(ctl, "db", &fake{}, 2); err == nil {
		t.Error("a second pool of the same name accepted")
	}
}

package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/moirai-go/moirai/guard"
)

var _ guard.Leaser = (*Source)(nil)

// maxLockName is the longest name GET_LOCK takes.
const maxLockName = 64

// lockName is the GET_LOCK name of a lease: the name itself, or a hash of
// it when it is longer than GET_LOCK takes.
func lockName(name string) string {
	if len(name) <= maxLockName {
		return name
	}
	return fmt.Sprintf("moirai-guard:%016x", uint64(guard.LeaseKey(name)))
}

// Lease takes the user lock of name with GET_LOCK(name, 0) on a
// connection of the source's own (never the poll's), or checks with
// IS_USED_LOCK that this connection still holds it. The server releases
// it when the connection ends. While the lease is held, Cancel and
// Terminate run on that connection.
func (s *Source) Lease(ctx context.Context, name string) (bool, error) {
	name = lockName(name)
	if s.lease != nil && s.leaseHeld && s.leaseName != name {
		_ = s.Release(ctx)
	}
	if s.lease == nil {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return false, fmt.Errorf("guard/mysql: lease connection: %w", err)
		}
		s.lease = conn
	}
	if s.leaseHeld {
		var mine sql.NullBool
		if err := s.lease.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", name).Scan(&mine); err != nil {
			s.dropLease()
			return false, fmt.Errorf("guard/mysql: lease connection lost: %w", err)
		}
		if !mine.Valid || !mine.Bool {
			s.dropLease()
			return false, fmt.Errorf("guard/mysql: lease %q no longer held by this connection", name)
		}
		return true, nil
	}
	var got sql.NullInt64
	if err := s.lease.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil {
		s.dropLease()
		return false, fmt.Errorf("guard/mysql: GET_LOCK: %w", err)
	}
	s.leaseHeld, s.leaseName = got.Valid && got.Int64 == 1, name
	return s.leaseHeld, nil
}

// Release releases the lease and closes its connection.
func (s *Source) Release(ctx context.Context) (err error) {
	if s.leaseHeld { // held only on an open connection
		_, err = s.lease.ExecContext(ctx, "DO RELEASE_LOCK(?)", s.leaseName)
	}
	s.dropLease()
	return err
}

// dropLease closes the lease's connection; database/sql discards it rather
// than pooling it, so the server ends the session and releases the lock.
func (s *Source) dropLease() {
	if s.lease != nil {
		_ = s.lease.Raw(func(any) error { return errDiscard })
		_ = s.lease.Close()
	}
	s.lease, s.leaseHeld = nil, false
}

// errDiscard makes database/sql discard a connection rather than pool it
// (a Raw callback returning driver.ErrBadConn).
var errDiscard = driver.ErrBadConn

// actionConn returns the connection an action runs on: the lease's while
// the source holds the lease (only a replica the server still sees
// holding it acts), else one of the pool's (closed by done).
func (s *Source) actionConn(ctx context.Context) (conn *sql.Conn, done func(error), err error) {
	if s.leaseHeld && s.lease != nil {
		return s.lease, func(err error) {
			if err != nil && !errors.Is(err, guard.ErrChanged) && !errors.Is(err, guard.ErrVanished) {
				s.dropLease() // the lease's connection may be broken: the lease is gone
			}
		}, nil
	}
	conn, err = s.db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("guard/mysql: %w", err)
	}
	return conn, func(error) { conn.Close() }, nil
}

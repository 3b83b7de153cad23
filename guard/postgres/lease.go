package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
)

var _ guard.Leaser = (*Source)(nil)

// Lease takes the session advisory lock guard.LeaseKey(name) with
// pg_try_advisory_lock on a connection of the source's own (never the
// poll's), or checks that the connection holding it is alive: a session
// lock lasts until its session ends, so a live connection still holds it.
// The server releases it when the connection ends. While the lease is
// held, Cancel and Terminate run on that connection.
func (s *Source) Lease(ctx context.Context, name string) (bool, error) {
	key := guard.LeaseKey(name)
	if s.lease != nil && s.leaseHeld && s.leaseKey != key {
		_ = s.Release(ctx)
	}
	if s.lease == nil {
		conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
		if err != nil {
			return false, fmt.Errorf("guard/postgres: lease connection: %w", err)
		}
		s.lease = conn
	}
	if s.leaseHeld {
		if err := s.lease.Ping(ctx); err != nil {
			s.dropLease()
			return false, fmt.Errorf("guard/postgres: lease connection lost: %w", err)
		}
		return true, nil
	}
	var ok bool
	if err := s.lease.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		s.dropLease()
		return false, fmt.Errorf("guard/postgres: pg_try_advisory_lock: %w", err)
	}
	s.leaseHeld, s.leaseKey = ok, key
	return ok, nil
}

// Release unlocks the lease and closes its connection.
func (s *Source) Release(ctx context.Context) error {
	defer s.dropLease()
	if !s.leaseHeld { // held only on an open connection
		return nil
	}
	_, err := s.lease.Exec(ctx, "SELECT pg_advisory_unlock($1)", s.leaseKey)
	return err
}

// dropLease closes the lease's connection (the server releases the lock).
func (s *Source) dropLease() {
	if s.lease != nil {
		_ = s.lease.Close(context.Background())
	}
	s.lease, s.leaseHeld = nil, false
}

// querier is what signal runs its statement on: the pool, or the lease's
// connection while the lease is held.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// signaller returns where an action runs: on the lease's connection while
// the source holds the lease, so that only a replica the server still
// sees holding it acts.
func (s *Source) signaller() querier {
	if s.leaseHeld && s.lease != nil {
		return s.lease
	}
	return s.pool
}

package guard

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// Leaser is implemented by sources that can hold a lease through the
// server itself, so that of several replicas of a guard on one server
// only one acts (PostgreSQL: a session advisory lock; MariaDB:
// GET_LOCK). The lease lives on a connection of the source's own, kept
// open while it is held: the server releases it when that connection
// ends, because the guard died or lost it. While the source holds the
// lease it runs Cancel and Terminate on that same connection, so an
// action is carried out only by a replica the server still sees holding
// the lease: a replica that lost it has its action fail, never doubled.
type Leaser interface {
	// Lease takes the lease name, or checks that the source still holds
	// it, without waiting. It returns whether the source holds it now;
	// with an error it does not (its connection failed, and the next
	// call opens a new one).
	Lease(ctx context.Context, name string) (bool, error)
	// Release gives the lease up and closes its connection.
	Release(ctx context.Context) error
}

// LeaseKey is the 64-bit key of a lease name, for servers whose locks
// take a number (PostgreSQL's advisory locks).
func LeaseKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// Roles of a guard (see [Guard.Status]).
const (
	RoleActive  = "active"  // holds the lease: acts
	RoleStandby = "standby" // another replica holds the lease: decides, never acts
	RoleDryRun  = "dry-run" // never acts, needs no lease
	RoleSolo    = "solo"    // acts without a lease (Options.NoLease, or a source without one)
)

// leaseName is the lease of a guard acting in scope: one per server and
// database ("*" for every database).
func leaseName(opt Options, scope string) string {
	if opt.Lease != "" {
		return opt.Lease
	}
	if scope == "" {
		scope = "*"
	}
	return "moirai-guard:" + scope
}

// checkLease takes or confirms the lease before a poll, and records a
// change of role.
func (g *Guard) checkLease(ctx context.Context) {
	if g.leaser == nil {
		return
	}
	held, err := func() (held bool, err error) {
		defer func() {
			if r := recover(); r != nil {
				held, err = false, fmt.Errorf("guard: %s source panicked taking the lease: %v", g.src.Name(), r)
			}
		}()
		return g.leaser.Lease(ctx, g.lease)
	}()
	g.mu.Lock()
	was := g.role
	g.role = RoleStandby
	if held {
		g.role = RoleActive
	}
	now := g.role
	if now != was {
		g.roleSince = time.Now()
	}
	g.mu.Unlock()
	g.m.leased(held, now != was)
	switch {
	case err != nil && ctx.Err() == nil:
		g.opt.Logger.Warn("guard: lease check failed: standing by", "lease", g.lease, "err", err)
	case now != was:
		g.opt.Logger.Info("guard: role changed", "role", now, "was", was, "lease", g.lease)
	}
}

// Status is what a guard says of itself to a health check.
type Status struct {
	Role      string    `json:"role"` // Role* constants
	Lease     string    `json:"lease,omitempty"`
	RoleSince time.Time `json:"role_since"`
	// LastPoll is when the last successful poll ended (zero: none yet);
	// LastError the error of the last poll when it failed.
	LastPoll  time.Time `json:"last_poll"`
	LastError string    `json:"last_error,omitempty"`
	Polls     uint64    `json:"polls"`
	Failures  uint64    `json:"failures"`
	Decisions int       `json:"decisions"`
	// Reloads counts the options applied by Reload; ReloadError is why the
	// last reload was refused ("" when it was applied).
	Reloads     uint64 `json:"reloads"`
	ReloadError string `json:"reload_error,omitempty"`
	// SLO and Interval are the options in force.
	SLO      time.Duration `json:"slo_ns"`
	Interval time.Duration `json:"interval_ns"`
}

// Status returns the guard's role and the state of its polls. It is safe
// for concurrent use.
func (g *Guard) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Status{Role: g.role, Lease: g.lease, RoleSince: g.roleSince, LastPoll: g.lastPoll, LastError: g.lastErr,
		Polls: g.polls, Failures: g.failures, Decisions: len(g.decisions), Reloads: g.reloads, ReloadError: g.reloadErr,
		SLO: g.opt.SLO, Interval: g.opt.Interval}
}

package guard

import (
	"context"
	"fmt"
)

// Reload replaces the guard's options while it runs: the poll in progress
// finishes with the old ones, the next starts with the new. The guard
// keeps its outputs — Audit, Logger and Registerer of opt are ignored:
// the audit file, the log and the metrics go on unbroken — and its
// history (the snapshots' integration, the statements' learnt durations,
// the tasks already acted on, the rate limits). The policy starts its
// confirmations afresh when the objective or an interval changes.
//
// It returns an error, and changes nothing, when opt would give the
// guard no scope (see Options.Database) or names another lease than the
// one held. It is safe for concurrent use with Run.
func (g *Guard) Reload(opt Options) error {
	g.mu.Lock()
	cur := g.opt
	g.mu.Unlock()
	opt.Audit, opt.Logger, opt.Registerer = cur.Audit, cur.Logger, cur.Registerer
	opt.defaults()
	err := g.validReload(cur, opt)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.reloadErr = err.Error()
		g.m.reloaded(false)
		return err
	}
	g.pending, g.reloadErr = &opt, ""
	return nil
}

func (g *Guard) validReload(cur, opt Options) error {
	if _, err := scopeOf(g.src, opt); err != nil {
		return fmt.Errorf("guard: reload refused, the options in force are kept: %w", err)
	}
	if opt.Lease != cur.Lease {
		return fmt.Errorf("guard: reload refused, the options in force are kept: the lease name cannot change while the guard runs (%q to %q): restart it", cur.Lease, opt.Lease)
	}
	return nil
}

// applyPending applies the options of the last Reload, between polls.
func (g *Guard) applyPending() {
	g.mu.Lock()
	p := g.pending
	g.pending = nil
	g.mu.Unlock()
	if p == nil {
		return
	}
	old := g.opt
	scope, _ := scopeOf(g.src, *p) // validated by Reload
	g.mu.Lock()
	g.opt, g.scope = *p, scope
	g.reloads++
	g.mu.Unlock()
	g.cross = nil // recomputed for the new scope
	if old.SLO != p.SLO || old.Interval != p.Interval || old.AlertInterval != p.AlertInterval {
		g.configure()
	}
	g.b.MinRun = p.SLO
	g.releaseIfDropped()
	g.setRole()
	g.m.reloaded(true)
	g.opt.Logger.Info("guard: options reloaded", "reloads", g.reloads, "role", g.Status().Role)
}

// releaseIfDropped gives the lease up when the new options no longer
// take it (a dry run, NoLease) or take another one (a new scope).
func (g *Guard) releaseIfDropped() {
	if g.leaser == nil {
		return
	}
	want := !g.opt.DryRun && !g.opt.NoLease
	if want && leaseName(g.opt, g.scope) == g.lease {
		return
	}
	_ = g.Release(context.Background())
}

// Stop asks Run to return nil once the poll in progress, and the actions
// it decided, are done: a graceful stop. It is safe to call more than
// once, and from any goroutine.
func (g *Guard) Stop() { g.stopOnce.Do(func() { close(g.stop) }) }

// Release gives the lease up (when the guard holds one), so that a
// standby takes over at its next poll rather than when the server notices
// the connection gone. Call it after Run has returned.
func (g *Guard) Release(ctx context.Context) error {
	if g.leaser == nil {
		return nil
	}
	err := g.leaser.Release(ctx)
	g.mu.Lock()
	if g.role == RoleActive {
		g.role = RoleStandby
	}
	g.mu.Unlock()
	g.m.leased(false, true)
	return err
}

// RefuseReload records a reload refused before it reached Reload (a
// config file that does not parse, or a setting that cannot change while
// the guard runs): Status and the metrics say so.
func (g *Guard) RefuseReload(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reloadErr = Escape(err.Error())
	g.m.reloaded(false)
}

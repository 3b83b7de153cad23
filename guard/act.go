package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/internal/attrmap"
)

// act carries out (or records) one cancel decision on the task chosen in
// the snapshot built from obs.
//
// It returns false, recording nothing, for a standby's decision on a task
// it reported already.
func (g *Guard) act(ctx context.Context, obs *Observation, id uint64, reason string, details []slog.Attr) (Decision, bool) {
	now := obs.At
	d := Decision{Time: now, Action: "cancel", Task: id, Reason: reason, Evaluation: attrmap.Map(details, slog.Value.Any)}
	target, s, ok := g.b.Target(id)
	if !ok {
		d.Outcome, d.Note = OutcomeSkipped, "the task is not in the last poll"
		return g.record(d), true
	}
	d.Target, d.User, d.App = target, s.User, s.Application
	if code, why := g.blocker(s); code != "" {
		d.Outcome, d.Note, d.Blocked = OutcomeSkipped, why, code
		return g.record(d), true
	}
	if g.b.holdsLock(s.ID) {
		d.Root = s.ID
	}
	d.Reason, d.Inferred = g.annotate(id, s, d.Reason)
	if !s.Active {
		d.Action = "terminate"
	}
	if g.role == RoleStandby {
		// Another replica holds the lease: it acts; this one says once
		// what it would have done, and acts if it takes the lease while
		// the task is still chosen.
		if g.standby[id] {
			return Decision{}, false
		}
		if len(g.standby) >= maxDecisions {
			clear(g.standby)
		}
		g.standby[id] = true
		d.Outcome, d.Note = OutcomeStandby, "standby: another replica holds the lease "+g.lease
		return g.record(d), true
	}
	mono := g.clock()
	if g.acted && mono-g.lastAction < g.opt.MinInterval {
		d.Outcome, d.Note = OutcomeSkipped, fmt.Sprintf("minimum interval between actions (%v) not elapsed", g.opt.MinInterval)
		return g.record(d), true
	}
	recent := g.actions[:0]
	for _, t := range g.actions {
		if mono-t < time.Minute {
			recent = append(recent, t)
		}
	}
	g.actions = recent
	if len(g.actions) >= g.opt.MaxPerMinute {
		d.Outcome, d.Note = OutcomeSkipped, fmt.Sprintf("%d actions in the last minute already (the maximum)", g.opt.MaxPerMinute)
		return g.record(d), true
	}
	// From here on the task is never chosen again, whatever happens.
	g.b.MarkCancelled(id)
	if g.opt.DryRun {
		d.Outcome = OutcomeDryRun
		return g.record(d), true
	}
	err := g.call(ctx, d.Action, target)
	g.acted, g.lastAction = true, mono
	g.actions = append(g.actions, mono)
	switch {
	case err == nil:
		d.Outcome = OutcomeActed
	case errors.Is(err, ErrVanished), errors.Is(err, ErrChanged):
		d.Outcome, d.Note = OutcomeSkipped, err.Error()
	default:
		d.Outcome, d.Note = OutcomeFailed, err.Error()
	}
	return g.record(d), true
}

// annotate adds to the policy's reason for choosing task id (of session
// s) what the policy cannot know: that the session's hold was inferred,
// and its share of the server's work when it holds the server.
func (g *Guard) annotate(id uint64, s *Session, reason string) (string, bool) {
	inferred := g.b.Inferred(s.ID)
	if inferred {
		reason += "; its hold is inferred (the server shows no metadata lock view): it is the only session that can hold the lock"
	}
	if share, ok := g.b.shares[id]; ok {
		reason += fmt.Sprintf("; it had %.0f%% of the server's statement time in the last span", 100*share)
	}
	return reason, inferred
}

// call runs the source's action, turning a panic into an error.
func (g *Guard) call(ctx context.Context, action string, t Target) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("guard: %s source panicked during %s: %v", g.src.Name(), action, r)
		}
	}()
	if action == "terminate" {
		return g.src.Terminate(ctx, t)
	}
	return g.src.Cancel(ctx, t)
}

// maxDecisions is how many decisions Decisions keeps.
const maxDecisions = 256

func (g *Guard) record(d Decision) Decision {
	d = escapeAll(d) // every output of it shows server strings escaped
	g.mu.Lock()
	g.decisions = append(g.decisions, d)
	if len(g.decisions) > maxDecisions {
		g.decisions = append(g.decisions[:0:0], g.decisions[len(g.decisions)-maxDecisions:]...)
	}
	g.mu.Unlock()
	g.m.decided(d)
	log := g.opt.Logger.Info
	if d.Outcome == OutcomeFailed {
		log = g.opt.Logger.Warn
	}
	log("guard: decision", "action", d.Action, "outcome", d.Outcome, "session", d.Target.Session,
		"root", d.Root, "user", d.User, "note", d.Note, "reason", d.Reason)
	if g.audit != nil {
		func() {
			defer func() { _ = recover() }() // a failing audit writer never stops the guard
			g.audit.Info("decision", "action", d.Action, "outcome", d.Outcome, "note", d.Note,
				"task", d.Task, "session", d.Target.Session, "statement", d.Target.Statement,
				"query_start", d.Target.QueryStart, "xact_start", d.Target.XactStart,
				"user", d.User, "application", d.App, "query", g.auditQuery(d.Target.Query),
				"reason", d.Reason, "root", d.Root, "resource", d.Resource, "waiters", d.Waiters,
				"blocked", d.Blocked, "inferred", d.Inferred, "evaluation", d.Evaluation)
		}()
	}
	return d
}

// auditQuery is what the audit holds of a statement: its fingerprint, or
// its text with AuditRawSQL.
func (g *Guard) auditQuery(q string) string {
	if g.opt.AuditRawSQL {
		return truncate(q, 1024)
	}
	return truncate(Fingerprint(q), 1024)
}

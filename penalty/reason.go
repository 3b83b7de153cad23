package penalty

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// penalty is the decision to penalize the noisy task nt, whose hold n
// defers the victim vt by td (its t_f is tf).
func (p *Policy) penalty(s *snapshot.Snapshot, nt, vt *snapshot.Task, n hold, td time.Duration, tf float64) policy.Decision {
	limit := p.capFor(s, nt.Class, n.res)
	return policy.Decision{
		Action:   policy.Penalize,
		Task:     nt.ID,
		Class:    nt.Class,
		Delay:    p.next(nt, vt, td, tf, limit),
		Resource: s.Resources[n.res].Name,
		Reason:   fmt.Sprintf("defers task %d on %s: %s", vt.ID, s.Resources[n.res].Name, deferral(vt.ID, tf, vt.Goal)),
		Details: []slog.Attr{
			slog.Uint64("victim", vt.ID),
			slog.Duration("victim_deferred", td),
			slog.Duration("victim_exec", vt.Exec),
			slog.Duration("noisy_exec", nt.Exec),
			slog.Duration("noisy_hold", n.hold),
			slog.Duration("cap", limit),
		},
	}
}

// deferral says in words how far beyond its tolerance the victim is
// deferred: tf is the time it was deferred per second it ran (+Inf when it
// has not run between its waits), limit the most it tolerates
// (Spec.MaxDeferral).
func deferral(victim uint64, tf, limit float64) string {
	if math.IsInf(tf, 1) {
		return fmt.Sprintf("task %d has only waited so far, where it tolerates %.2f s deferred per second it runs", victim, limit)
	}
	return fmt.Sprintf("task %d was deferred %.2f s per second it ran, more than the %.2f s it tolerates", victim, tf, limit)
}

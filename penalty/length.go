package penalty

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// length is an adaptive penalty length and how it got there.
type length struct {
	p      time.Duration
	steps  int // adaptations that changed p by more than 5 %
	fixed  int // adaptations since the last such change
	policy string
}

// next returns the noisy task's next penalty length, adapting the length
// it (or, for a new task, its class) reached before, and capped at limit.
func (p *Policy) next(nt, vt *snapshot.Task, td time.Duration, tf float64, limit time.Duration) time.Duration {
	r := p.tasks[nt.ID]
	l := &r.length
	if l.p == 0 {
		if c := p.classes[nt.Class]; c != nil && nt.Class != "" {
			*l = *c
		}
	}
	old := l.p
	if l.p == 0 {
		// p1 = sqrt(t_d(victim) · t_e(noisy)) − t_e(noisy)
		te := float64(nt.Exec)
		d := time.Duration(math.Sqrt(float64(td)*te) - te)
		l.p, l.policy = max(d, p.min), "first"
	} else {
		goal := goalOf(vt)
		// The deferring time beyond what the goal allows.
		excess := td - time.Duration(goal*float64(vt.Exec-td))
		if excess > Delta*l.p {
			gap := float64(excess) / float64(l.p)
			l.p = time.Duration(float64(l.p) * gap / Delta)
			l.policy = "gap"
			p.stats.GapBased++
		} else {
			score := min(max(tf/goal-1, 0), Alpha)
			l.p = time.Duration(float64(l.p) * (1 + score/Alpha))
			l.policy = "score"
			p.stats.ScoreBased++
		}
	}
	if l.p > limit {
		l.p = limit
		p.stats.Capped++
	}
	if old == 0 || math.Abs(float64(l.p-old)) > converged*float64(old) {
		l.steps += 1 + l.fixed
		l.fixed = 0
	} else {
		l.fixed++
	}
	if nt.Class != "" {
		if _, ok := p.classes[nt.Class]; ok || len(p.classes) < MaxClasses {
			c := *l
			p.classes[nt.Class] = &c
		} else {
			p.stats.ClassesDropped++
		}
	}
	p.stats.Penalties++
	return l.p
}

// Package trend acts on a culprit in the making: a task whose share of a
// capacity-bounded resource (a buffer pool, a cache, a pool of slots) is
// crossing a large fraction of the capacity while the other tasks' misses
// or waits on it rise, before any request misses its objective.
//
// Detection from the victims' latency is too late where a culprit ruins a
// resource for everyone: a scan evicts a buffer pool's hot set within
// 100 ms, and refilling it from the victims' own misses takes seconds. The
// resource's trajectory shows it first ([snapshot.Trajectory]): the
// culprit's share grows, and the others' miss or wait rate leaves its calm
// baseline.
//
// # The rule
//
// For each bounded resource, the task whose share grows fastest (at least
// 20 % of the capacity per second, smoothed over 50 ms) is a
// suspect when it holds at least two units and its share is at least
// [WithShare] (default 0.1) of the
// capacity. The others suffer when their wait rate (a Memory's misses, a
// pool's waits, per second, counted over 30 ms) is at least [WithRise]
// (default 4) times its calm baseline and at least [WithMinRate] (default
// 25/s), with at least 3 waits in the span, unlikely by chance at the
// baseline (a Poisson tail below 10⁻⁴); while the suspect evicts what the
// others used, 2 waits at odds below 10⁻³ are enough. A suspect whose resource's others suffer is acted on:
//
//   - penalized first where a penalty applies (a Memory whose share still
//     grows into the spare part: a scan can be slowed at its next page);
//   - cancelled when it keeps growing after the penalty, or at once where
//     no penalty applies: slots already held, and a Memory's units the
//     suspect evicts from the others' part (half the capacity a second or
//     more), are not given back by delaying it.
//
// A task that uses much of a resource while the others' rates stay flat is
// left alone: honest heavy work is not a culprit. The baseline learns only
// while nobody is suspect, so a culprit cannot teach it its own damage.
//
// The policy is [policy.Continuous]: it decides on every step of the loop,
// since by the time an overload detector fires the damage is done. Only
// cancellable tasks are acted on; after acting on a resource the policy
// waits for the others' rate to fall back below the threshold before it
// acts on another task of that resource (one action per episode).
//
// [New] takes [Option] values, made by the With functions. They set a
// configuration of the package's own, read once by New; each one's doc
// says what a value out of its range does.
package trend

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// Policy is the early detector and its actions. See the package
// documentation. A Policy is not safe for concurrent use; the controller
// calls it from its loop only.
type Policy struct {
	config
	baseSpan time.Duration

	tr    *snapshot.Trajectory
	res   []resState
	acted map[uint64]stage // tasks acted on, pruned to the live ones
	live  map[uint64]struct{}
}

type stage uint8

const penalized stage = 1

// episodeRetry is how long after a cancellation the policy waits before
// asking again for the same culprit (the controller may have refused it,
// its minimum interval between cancellations not yet elapsed), and the
// least length of an episode.
const episodeRetry = 100 * time.Millisecond

type resState struct {
	base     float64       // calm baseline of the others' wait rate
	calm     time.Duration // calm time the baseline was learned over
	quietAt  time.Duration // when the episode may end, or a skipped cancellation be retried
	episode  bool          // acted on, its others still suffering
	culprit  uint64        // the task the episode's cancellation was for
	suspect  int           // task index of the suspect of the last Observe, −1
	growth   float64       // the suspect's share, its growth and units held
	shareOf  float64
	held     int64
	evicting float64 // the suspect's evictions of others' units, capacity/s
	suffered bool    // the others suffer (last Observe)
}

// Option configures [New]. Options are made by the With functions; they
// set an unexported configuration, which New applies to the policy it
// returns once all of them ran.
type Option func(*config)

// config is what the options set.
type config struct {
	share, rise, minRate float64
	penalty              time.Duration
}

// WithShare sets the share of capacity, in (0, 1], from which the task
// growing fastest is a suspect (default 0.1).
func WithShare(f float64) Option {
	return func(c *config) { opt.Set(&c.share, f, f > 0 && f <= 1) }
}

// WithRise sets how many times its calm baseline the others' wait rate
// must reach for them to suffer (default 4, at least 1).
func WithRise(k float64) Option {
	return func(c *config) { opt.Set(&c.rise, k, k >= 1) }
}

// WithMinRate sets the least others' wait rate, in waits per second, that
// counts as suffering whatever the baseline (default 25).
func WithMinRate(r float64) Option {
	return func(c *config) { opt.Set(&c.minRate, r, r > 0) }
}

// WithPenalty sets the first penalty's length (default 20 ms; 0 turns
// penalties off, so that a suspect is cancelled at once).
func WithPenalty(d time.Duration) Option {
	return func(c *config) { c.penalty = max(d, 0) }
}

// New returns the policy.
func New(opts ...Option) *Policy {
	c := config{share: 0.1, rise: 4, minRate: 25, penalty: 20 * time.Millisecond}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return &Policy{config: c,
		baseSpan: 2 * time.Second, tr: snapshot.NewTrajectory(spanOf),
		acted: make(map[uint64]stage), live: make(map[uint64]struct{})}
}

var (
	_ policy.Policy     = (*Policy)(nil)
	_ policy.Observer   = (*Policy)(nil)
	_ policy.Continuous = (*Policy)(nil)
)

// Name returns "trend".
func (p *Policy) Name() string { return "trend" }

// Watching reports whether a resource has a suspect whose others suffer,
// or an episode in progress: the loop's fine tick is wanted then.
func (p *Policy) Watching() bool {
	for i := range p.res {
		if p.res[i].suffered || p.res[i].episode {
			return true
		}
	}
	return false
}

// Observe follows the resources' trajectory and learns their calm
// baselines.
func (p *Policy) Observe(s *snapshot.Snapshot) {
	p.tr.Observe(s)
	for len(p.res) < len(s.Resources) {
		p.res = append(p.res, resState{})
	}
	p.res = p.res[:len(s.Resources)]
	for i := range p.res {
		st, sig := &p.res[i], p.tr.Resource(i)
		st.suspect, st.suffered, st.evicting = -1, false, 0
		if !sig.Bounded {
			continue
		}
		best := -1.0
		for _, sh := range p.tr.Shares() {
			if sh.Res == i && sh.Held >= 2 && sh.Share >= p.share && sh.Growth >= minGrowth && sh.Growth > best {
				st.suspect, best, st.growth, st.shareOf, st.held, st.evicting = sh.Task, sh.Growth, sh.Growth, sh.Share, sh.Held, sh.Evicting
			}
		}
		st.suffered = p.suffers(st, sig)
		if st.episode && !st.suffered && s.At >= st.quietAt {
			st.episode = false
		}
		if !st.suffered && !st.episode && s.Window > 0 && sig.Span > 0 {
			// The first second's average, then a moving one.
			st.calm += s.Window
			alpha := float64(s.Window) / float64(min(p.baseSpan, st.calm))
			st.base += alpha * (sig.OthersWaitRate - st.base)
		}
	}
	// Forget the tasks that are gone.
	if len(p.acted) == 0 {
		return
	}
	clear(p.live)
	for i := range s.Tasks {
		p.live[s.Tasks[i].ID] = struct{}{}
	}
	for id := range p.acted {
		if _, ok := p.live[id]; !ok {
			delete(p.acted, id)
		}
	}
}

// suffers reports whether the others' waits are risen on a resource of
// state st: at least minWaits of them over the trajectory's span, at a
// rate of at least minRate and rise times the calm baseline.
func (p *Policy) suffers(st *resState, sig *snapshot.ResourceSignals) bool {
	least, odds := int64(minWaits), chance
	if st.suspect >= 0 && st.evicting >= minEvicting {
		// The suspect pushes out what the others use: their first
		// misses are the start of a rise, not chance.
		least, odds = minWaitsEvicting, chanceEvicting
	}
	if sig.OthersWaits < least || sig.OthersWaitRate < p.minRate || sig.OthersWaitRate < p.rise*st.base {
		return false
	}
	// Not chance: that many waits are unlikely at the calm rate (taken
	// as at least 1/s, a baseline of zero being a short sample).
	return poissonTail(sig.OthersWaits, max(st.base, 1)*sig.Span.Seconds()) < odds
}

// While the suspect evicts what the others used at minEvicting of the
// capacity per second or more, minWaitsEvicting of the others' waits in
// the span, at odds below chanceEvicting, are enough to show the rise.
const (
	minEvicting      = 0.5
	minWaitsEvicting = 2
	chanceEvicting   = 1e-3
)

// chance is how unlikely, at the calm rate, the others' waits of a span
// must be to count as risen.
const chance = 1e-4

// minGrowth is the least growth, in capacity per second, of a suspect's
// share: a task whose share stands still did not make the others' waits
// rise (it was there before them), and one that takes 5 s or more to fill
// the capacity leaves time to the detectors of objectives.
const minGrowth = 0.2

// poissonTail returns P(X ≥ k) for X of Poisson law of mean m.
func poissonTail(k int64, m float64) float64 {
	term, cdf := math.Exp(-m), 0.0
	for i := int64(0); i < k; i++ {
		cdf += term
		term *= m / float64(i+1)
	}
	return max(0, 1-cdf)
}

// minWaits is the least count of the others' waits over the trajectory's
// span (30 ms) that can show a rise: one or two are chance.
const minWaits = 3

// spanOf is the span the trajectory counts waits over.
const spanOf = 30 * time.Millisecond

// Decide acts on the suspects whose resource's others suffer.
func (p *Policy) Decide(s *snapshot.Snapshot) []policy.Decision {
	var out []policy.Decision
	for i := range p.res {
		st := &p.res[i]
		if i >= len(s.Resources) || st.suspect < 0 || st.suspect >= len(s.Tasks) || !st.suffered {
			continue
		}
		t := &s.Tasks[st.suspect]
		if st.episode && (t.ID != st.culprit || s.At < st.quietAt) {
			// One action per episode; a cancellation the controller
			// skipped is asked for again after a while.
			continue
		}
		if !t.Cancellable || t.Cancelled {
			continue
		}
		r, sig := &s.Resources[i], p.tr.Resource(i)
		act := policy.Cancel
		if p.penalty > 0 && r.Kind == resource.KindMemory && p.acted[t.ID] == 0 && st.evicting < minEvicting {
			// A delay slows a share that grows into the spare part; what
			// a suspect already evicts of the others' part is not given
			// back by delaying it, as slots already held are not.
			act = policy.Penalize
		}
		d := policy.Decision{Action: act, Task: t.ID, Class: t.Class,
			Reason: fmt.Sprintf("%s on %s: share %.0f%% of capacity %d growing %+.0f%%/s, evicting others' %.0f%%/s, while the others' waits run at %.0f/s (%d in %v; calm baseline %.1f/s)",
				verb(act), r.Name, 100*st.shareOf, r.Capacity, 100*st.growth, 100*st.evicting, sig.OthersWaitRate, sig.OthersWaits, sig.Span, st.base),
			Details: []slog.Attr{
				slog.String("signal", "share-and-others-waits"),
				slog.String("resource", r.Name),
				slog.Int64("held", st.held),
				slog.Int64("capacity", r.Capacity),
				slog.Float64("share", st.shareOf),
				slog.Float64("growth_per_s", st.growth),
				slog.Float64("evicting_per_s", st.evicting),
				slog.Float64("others_wait_rate", sig.OthersWaitRate),
				slog.Int64("others_waits", sig.OthersWaits),
				slog.Float64("baseline_wait_rate", st.base),
			}}
		if act == policy.Penalize {
			d.Delay = p.penalty
			p.acted[t.ID] = penalized
		} else {
			st.episode, st.culprit = true, t.ID
			st.quietAt = s.At + episodeRetry
		}
		out = append(out, d)
	}
	return out
}

func verb(a policy.Action) string {
	if a == policy.Penalize {
		return "culprit in the making, penalized"
	}
	return "culprit in the making, cancelled"
}

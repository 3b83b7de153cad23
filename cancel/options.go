package cancel

import (
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/enum"
	"github.com/moirai-go/moirai/internal/opt"
)

// Variant selects how an [Atropos] policy weighs and picks.
type Variant uint8

const (
	// MultiObjective is Atropos Algorithm 1: the non-dominated set of the
	// candidates' future gains over the contended resources, then the
	// largest Σ_r C_r · gain.
	MultiObjective Variant = iota + 1
	// Greedy is the ablation that looks at the most contended resource only
	// and picks the largest future gain on it.
	Greedy
	// CurrentUsage is the ablation that runs MultiObjective on the
	// candidates' current usage instead of their future gain.
	CurrentUsage
)

type atroposConfig struct {
	window        time.Duration
	confirm       time.Duration
	minContention float64
	minGain       time.Duration
	minEvictShare float64
	logged        int
	durations     *estimate.Durations
	preemptAfter  int
}

// An AtroposOption configures [NewAtropos].
type AtroposOption func(*atroposConfig)

// WithMinContention sets the contention level C_r at or above which a
// resource counts as contended (default 0.1: a tenth of the window's
// execution time lost to it): a decision is taken only when some resource
// is. Once one is, every resource with a tenth of that level also counts,
// weighted by its level, so that a task that frees a little of a second
// resource besides the first is preferred to one that frees only the
// first. The resource that reaches the threshold, if a lock or queue,
// must also have waiters at the moment of the snapshot: a queue that has
// drained is no longer overloaded, whatever its window says. Values
// outside (0, 1] are ignored.
func WithMinContention(c float64) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.minContention, c, c > 0 && c <= 1) }
}

// WithContentionWindow sets the sliding window over which the policy
// measures contention from the snapshots it observes (default 200 ms): long
// enough that one loop tick's noise (a lock that happened to have no
// waiter for 5 ms) does not hide a contended resource, short enough that a
// resource relieved by a cancellation stops looking contended soon after.
// Snapshots the policy did not observe (an external source calling Decide
// alone) are measured over their own window. Non-positive values are
// ignored.
func WithContentionWindow(d time.Duration) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.window, d, d > 0) }
}

// WithConfirmation sets how long the same task must stay the policy's
// choice before it is cancelled (default 10 ms: two or more fine ticks of
// the controller's loop). A culprit stays the choice for as long as it
// holds what others need; a victim that the scheduler stalled while it held
// a lock for a moment stops being the choice as soon as it runs again.
// Zero decides at once.
func WithConfirmation(d time.Duration) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.confirm, d, d >= 0) }
}

// WithMinGain sets the least future usage of a contended lock, queue, CPU
// or IO resource that makes a task a candidate when no task waiting for the
// resource has a latency objective of its own (default 10 ms of the whole
// resource; the controller's default policy uses half its latency
// objective): a task expected to release what it holds sooner than that
// frees nothing worth a cancellation, since its waiters get the resource
// within their objective anyway. It is also what keeps a victim that holds
// the lock for a moment, or that the scheduler stalled while it held it,
// from being taken for a culprit. When tasks with objectives wait for the
// resource, the minimum gain on it follows the victims a cancellation
// protects: half the tightest of their objectives, a waiter with no
// objective of its own (snapshot.Task.Objective 0: the process default)
// counting for d; background waiters and waiters of task.NoObjective do
// not count. Negative values are ignored.
func WithMinGain(d time.Duration) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.minGain, d, d >= 0) }
}

// WithMinEvictionShare sets the least future usage of a contended memory
// resource, as a share of the pool's size, that makes a task a candidate
// (default 0.01). Values outside [0, 1] are ignored.
func WithMinEvictionShare(f float64) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.minEvictShare, f, f >= 0 && f <= 1) }
}

// WithCandidatesLogged sets how many of the best candidates a decision's
// explanation lists (default 5, at least 1).
func WithCandidatesLogged(n int) AtroposOption {
	return func(cfg *atroposConfig) { cfg.logged = max(n, 1) }
}

// WithDurations makes the policy estimate progress from d, shared with
// other users, instead of a learner of its own. The policy's Observe then
// leaves d alone: whoever shares it feeds it (the controller feeds its own
// learner on every step).
func WithDurations(d *estimate.Durations) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.durations, d, d != nil) }
}

// WithPreemption makes the policy cancel a recurring culprit's task as it
// takes the lock its class's tasks were cancelled for, before anyone
// waits (policy.Preempter; see Atropos.Preempt): once after tasks of the
// class were cancelled holding the lock while others waited, and none of
// them ended on its own since. 0, the default, never preempts: every
// task is decided on from the waits it causes. Values under 0 are
// ignored.
func WithPreemption(after int) AtroposOption {
	return func(cfg *atroposConfig) { opt.Set(&cfg.preemptAfter, after, after >= 0) }
}

var variantNames = [...]string{MultiObjective: "atropos", Greedy: "atropos-greedy", CurrentUsage: "atropos-current"}

// String returns the policy name of the variant.
func (v Variant) String() string { return enum.Name(v, variantNames[:], "variant") }

package cancel

import (
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Atropos is the targeted-cancellation policy of the Atropos paper (SOSP'25)
// and its two ablations. See the package documentation.
//
// An Atropos learns class durations in [Atropos.Observe]; Observe and
// Decide must not be called concurrently (the controller calls both from
// its loop).
type Atropos struct {
	variant Variant
	cfg     atroposConfig
	// mixedSaid holds the classes reported mixed (diagnoseMixed).
	mixedSaid map[string]bool
	levels    []float64
	order     []int32
	top       []int32
	sky       []int32
	topSet    []bool
	dimOf     []int32
	floor     []float64
	work      []cand
	vals      []float64

	ownDurations bool
	pending      uint64        // the task chosen, awaiting confirmation
	pendingSince time.Duration // since when (snapshot time)
	steps        []observed    // the contention window, oldest first
	sumDelay     map[resKey]time.Duration
	sumExec      time.Duration

	uses     *estimate.Uses
	episodes map[resKey]episode
	// judged holds the resources on which cancellations are judged or
	// were refuted (see judgement); bounded, as episodes, by the
	// snapshots' resources.
	judged map[resKey]judgement
	// others is, per resource, a moving mean (over about a second) of the
	// units held and waited for by the tasks of classes known to be light
	// on it: the demand a known-heavy class's tasks leave room for.
	others map[resKey]float64
	// khCand and khHeavy are knownHeavy's results for the snapshot being
	// decided on; khHeld and khNewcomer its scratch: the units known-heavy
	// tasks hold, and whether a known-heavy newcomer waits, per resource.
	khCand     []int
	khHeavy    []int64
	khHeld     []int64
	khNewcomer []bool
	// gain is, per resource of the snapshot being decided on, its
	// minimum gain in seconds (see gainFloors).
	gain []float64
	// heavyRes holds, for WakeOn, the resources some class is known to
	// be heavy on (names of registered resources: bounded by the
	// application's resources, not by requests).
	heavyRes map[string]struct{}
	// culprits counts, per class and lock, the tasks cancelled while they
	// held it and others waited; waitedAt is, per lock, the last snapshot
	// in whose window a task waited for it (see Preempt). Bounded: by
	// maxCulprits, and by the snapshots' resources.
	culprits map[culpritKey]int
	waitedAt map[resKey]time.Duration
}

// resKey names a resource across snapshots: its position in a snapshot's
// Resources may change from one to the next (a source that reports only
// the locks it sees now adds and drops resources between polls).
type resKey struct {
	id   task.ResourceID
	name string
}

func keyOf(r *snapshot.Resource) resKey { return resKey{r.ID, r.Name} }

// observed is one observed snapshot's contribution to contention.
type observed struct {
	at    time.Duration
	exec  time.Duration
	delay []keyedDelay
}

type keyedDelay struct {
	key resKey
	d   time.Duration
}

var _ interface {
	policy.Policy
	policy.Observer
	policy.Confirmer
	policy.Waker
	policy.Continuous
	policy.Preempter
} = (*Atropos)(nil)

// Watching reports false: the policy decides on every step of the loop
// (policy.Continuous) so that tasks of classes known to be heavy are
// acted on at the acquisition that oversubscribes their resource, whether
// an overload detector fires or not (snapshot.Snapshot.Quiet); everything
// else waits for a detector, and wants no fine tick of its own.
func (a *Atropos) Watching() bool { return false }

// NewAtropos returns the policy of the given variant.
func NewAtropos(v Variant, opts ...AtroposOption) *Atropos {
	if v < MultiObjective || v > CurrentUsage {
		v = MultiObjective
	}
	a := &Atropos{variant: v, cfg: atroposConfig{
		window:        200 * time.Millisecond,
		confirm:       10 * time.Millisecond,
		minContention: 0.1,
		minGain:       10 * time.Millisecond,
		minEvictShare: 0.01,
		logged:        5,
	}}
	for _, o := range opts {
		if o != nil {
			o(&a.cfg)
		}
	}
	if a.cfg.durations == nil {
		a.cfg.durations = estimate.NewDurations(0)
		a.ownDurations = true
	}
	a.uses = estimate.NewUses(0)
	a.episodes = map[resKey]episode{}
	a.judged = map[resKey]judgement{}
	a.others = map[resKey]float64{}
	return a
}

// Name returns the variant's name: "atropos", "atropos-greedy" or
// "atropos-current".
func (a *Atropos) Name() string { return a.variant.String() }

// Durations returns the class-duration learner the policy estimates
// progress from.
func (a *Atropos) Durations() *estimate.Durations { return a.cfg.durations }

// Observe learns class durations from a snapshot of the loop, unless the
// learner was given with [WithDurations], and its classes' total use of
// each resource. It also follows episodes: a resource on which a
// cancelled task holds units is not decided on again until the task's
// holds are released and a snapshot has been observed since; the
// contention measured before is then forgotten, so the next decision
// rests on the use that came back, not on the overload that was acted on.
func (a *Atropos) Observe(s *snapshot.Snapshot) {
	if a.ownDurations {
		a.cfg.durations.Observe(s)
	}
	a.uses.Observe(s)
	a.observeWaits(s)
	if s.Window <= 0 {
		a.followEpisodes(s)
		return // cumulative numbers: no window to add
	}
	a.observeOthers(s)
	if a.sumDelay == nil {
		a.sumDelay = map[resKey]time.Duration{}
	}
	o := observed{at: s.At, exec: estimate.ExecTime(s), delay: make([]keyedDelay, 0, len(s.Resources))}
	for i := range s.Resources {
		r := &s.Resources[i]
		kd := keyedDelay{keyOf(r), estimate.Delay(s, r)}
		o.delay = append(o.delay, kd)
		a.sumDelay[kd.key] += kd.d
	}
	a.steps = append(a.steps, o)
	a.sumExec += o.exec
	// Keep the steps whose windows end within the contention window.
	for len(a.steps) > 1 && s.At-a.steps[0].at >= a.cfg.window {
		old := a.steps[0]
		for _, kd := range old.delay {
			if a.sumDelay[kd.key] -= kd.d; a.sumDelay[kd.key] <= 0 {
				delete(a.sumDelay, kd.key)
			}
		}
		a.sumExec -= old.exec
		a.steps = a.steps[1:]
	}
	if cap(a.steps) > 4*len(a.steps)+64 {
		a.steps = append([]observed(nil), a.steps...)
	}
	a.followEpisodes(s)
}

// contention fills a.levels for s: over the observed window when s is the
// latest observed snapshot, else over s's own window.
func (a *Atropos) contention(s *snapshot.Snapshot) {
	if n := len(a.steps); n == 0 || a.steps[n-1].at != s.At {
		a.levels = estimate.Contention(s, a.levels)
		return
	}
	a.levels = a.levels[:0]
	for i := range s.Resources {
		a.levels = append(a.levels, estimate.Level(a.sumDelay[keyOf(&s.Resources[i])], a.sumExec))
	}
}

// Confirm reports whether s has a contended resource: what turns a
// detector's suspicion into resource overload.
func (a *Atropos) Confirm(s *snapshot.Snapshot) bool {
	a.contention(s)
	a.knownHeavy(s)
	for i := range s.Resources {
		if a.confirms(&s.Resources[i], a.levels[i]) || a.khCand[i] >= 0 {
			return true
		}
	}
	return false
}

// Decide returns one cancel decision, or nil when no resource is contended
// or no cancellable task would free any of it. The decision's Details
// carry the explanation.
func (a *Atropos) Decide(s *snapshot.Snapshot) []policy.Decision {
	found := a.diagnoseMixed()
	var ev Evaluation
	ev.Chosen = -1
	a.evaluate(s, &ev, a.cfg.logged)
	if ev.Chosen < 0 {
		a.pending = 0
		return found
	}
	c := &ev.Candidates[ev.Chosen]
	// The confirmation keeps a victim the scheduler stalled from being
	// taken for a culprit; a task of a class known to be heavy, making its
	// resource oversubscribed, is no such victim.
	if a.cfg.confirm > 0 && !ev.Levels[ev.Contended[ev.Main]].KnownHeavy {
		if a.pending != c.Task || s.At < a.pendingSince {
			a.pending, a.pendingSince = c.Task, s.At
			return found
		}
		if s.At-a.pendingSince < a.cfg.confirm {
			return found
		}
	}
	a.pending = 0
	a.judge(s, c.Task)
	a.countCulprit(s, s.TaskByID(c.Task))
	// What the task used until now is not what a task of its class uses:
	// the learners must not take its end, when it comes, for a completed
	// task's (a source that sees the cancel only once the task is gone,
	// as a database's statement, never shows it cancelled).
	a.uses.Skip(c.Task)
	if a.cfg.durations != nil {
		a.cfg.durations.Skip(c.Task)
	}
	var gain float64
	if ev.Main < len(c.Usage) {
		gain = c.Usage[ev.Main]
	}
	return append(found, policy.Decision{
		Policy:   a.Name(),
		Action:   policy.Cancel,
		Task:     c.Task,
		Class:    c.Class,
		Resource: ev.Levels[ev.Contended[ev.Main]].Resource,
		Gain:     gain,
		Reason:   ev.Reason,
		Details:  ev.Attrs(a.cfg.logged),
	})
}

const (
	// FromProgress: use so far × (1−p)/p, p from the task's progress.
	FromProgress FutureSource = iota + 1
	// FromClassUse: its class's learned total use minus its use so far.
	FromClassUse
	// FromDemand: no history; it holds what makes the resource full.
	FromDemand
)

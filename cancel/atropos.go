package cancel

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
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

// String returns the policy name of the variant.
func (v Variant) String() string {
	switch v {
	case MultiObjective:
		return "atropos"
	case Greedy:
		return "atropos-greedy"
	case CurrentUsage:
		return "atropos-current"
	}
	return fmt.Sprintf("variant(%d)", uint8(v))
}

type atroposConfig struct {
	window        time.Duration
	confirm       time.Duration
	minContention float64
	minGain       time.Duration
	minEvictShare float64
	logged        int
	durations     *estimate.Durations
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
	return func(cfg *atroposConfig) {
		if c > 0 && c <= 1 {
			cfg.minContention = c
		}
	}
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
	return func(cfg *atroposConfig) {
		if d > 0 {
			cfg.window = d
		}
	}
}

// WithConfirmation sets how long the same task must stay the policy's
// choice before it is cancelled (default 10 ms: two or more fine ticks of
// the controller's loop). A culprit stays the choice for as long as it
// holds what others need; a victim that the scheduler stalled while it held
// a lock for a moment stops being the choice as soon as it runs again.
// Zero decides at once.
func WithConfirmation(d time.Duration) AtroposOption {
	return func(cfg *atroposConfig) {
		if d >= 0 {
			cfg.confirm = d
		}
	}
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
	return func(cfg *atroposConfig) {
		if d >= 0 {
			cfg.minGain = d
		}
	}
}

// WithMinEvictionShare sets the least future usage of a contended memory
// resource, as a share of the pool's size, that makes a task a candidate
// (default 0.01). Values outside [0, 1] are ignored.
func WithMinEvictionShare(f float64) AtroposOption {
	return func(cfg *atroposConfig) {
		if f >= 0 && f <= 1 {
			cfg.minEvictShare = f
		}
	}
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
	return func(cfg *atroposConfig) {
		if d != nil {
			cfg.durations = d
		}
	}
}

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
}

// episode is the state of a resource on which a cancelled task held units:
// until its holds are released and a snapshot has been observed since with
// nobody waiting for it (the backlog the overload left has drained: the
// freed use came back), the resource is not decided on again.
type episode struct {
	holding  bool          // a cancelled task held it at the last observed snapshot
	since    time.Duration // when the episode began
	released time.Duration // the snapshot that saw the holds released
}

// maxEpisode bounds an episode: a cancelled task that keeps its holds
// that long ignored its cancellation, and a resource whose waiters have not
// drained that long after the release is still overloaded by others; the
// resource is decided on again.
const maxEpisode = time.Second

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

var (
	_ policy.Policy     = (*Atropos)(nil)
	_ policy.Observer   = (*Atropos)(nil)
	_ policy.Confirmer  = (*Atropos)(nil)
	_ policy.Waker      = (*Atropos)(nil)
	_ policy.Continuous = (*Atropos)(nil)
)

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

// followEpisodes opens, advances and closes the episodes from s.
func (a *Atropos) followEpisodes(s *snapshot.Snapshot) {
	for k, e := range a.episodes {
		if e.holding {
			e.holding = false
			a.episodes[k] = e
		}
	}
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !t.Cancelled {
			continue
		}
		first, n := int(t.First), int(t.N)
		if first < 0 || n < 0 || first+n > len(s.Usage) {
			continue
		}
		for ui := first; ui < first+n; ui++ {
			u := &s.Usage[ui]
			if u.Held <= 0 || u.Res < 0 || int(u.Res) >= len(s.Resources) {
				continue
			}
			k := keyOf(&s.Resources[u.Res])
			e, ok := a.episodes[k]
			if !ok {
				e.since = s.At
			}
			e.holding, e.released = true, 0
			a.episodes[k] = e
		}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		k := keyOf(r)
		e, ok := a.episodes[k]
		if !ok {
			continue
		}
		switch {
		case e.holding && s.At-e.since < maxEpisode:
		case !e.holding && e.released == 0:
			e.released = max(s.At, 1)
			a.episodes[k] = e
		case e.holding, r.Waiters == 0 && s.At > e.released, s.At-e.released >= maxEpisode:
			delete(a.episodes, k)
			a.forget(k)
		}
	}
	for k := range a.episodes {
		if !slices.ContainsFunc(s.Resources, func(r snapshot.Resource) bool { return keyOf(&r) == k }) {
			delete(a.episodes, k) // the resource is gone from the snapshots
		}
	}
}

// forget drops the contention measured on resource k up to the newest
// observed snapshot.
func (a *Atropos) forget(k resKey) {
	for i := range a.steps {
		for j := range a.steps[i].delay {
			kd := &a.steps[i].delay[j]
			if kd.key == k && kd.d > 0 {
				if a.sumDelay[k] -= kd.d; a.sumDelay[k] <= 0 {
					delete(a.sumDelay, k)
				}
				kd.d = 0
			}
		}
	}
}

// inEpisode reports whether r is in an episode.
func (a *Atropos) inEpisode(r *snapshot.Resource) bool {
	_, ok := a.episodes[keyOf(r)]
	return ok
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

// usageOf returns the usage of Tasks[ti], or nil when a source gave it
// out of bounds.
func usageOf(s *snapshot.Snapshot, ti int) []snapshot.Usage {
	t := &s.Tasks[ti]
	first, n := int(t.First), int(t.N)
	if first < 0 || n < 0 || first+n > len(s.Usage) {
		return nil
	}
	return s.Usage[first : first+n]
}

// heavyOn reports whether class is known to be heavy on resource r: the
// runtime has seen its tasks end having used r for the minimum gain or
// more, typically (estimate.Uses.Typical: a light class whose tasks
// were stalled for a while is not heavy).
func (a *Atropos) heavyOn(class string, r *snapshot.Resource) bool {
	// The process-wide minimum gain, not the waiters' (gainFloors): a
	// class is heavy or not whoever waits at the moment.
	total, ok := a.uses.Typical(class, r.Name)
	return ok && total >= a.cfg.minGain.Seconds() && !a.mixed(class)
}

// lightOn reports whether class is known to be light on resource r: the
// runtime has seen its tasks end, and not heavy on r (see heavyOn). A
// class with no ended task is neither: the first report of a class
// runs with no history, and counting its units among the others' demand
// would make the next report, once the class is known heavy, look like
// an overload for as long as the moving mean remembers the first.
func (a *Atropos) lightOn(class string, r *snapshot.Resource) bool {
	total, ok := a.uses.Typical(class, r.Name)
	return ok && total < a.cfg.minGain.Seconds() && !a.mixed(class)
}

// mixed reports whether class is mixed (estimate.Uses.Mixed against the
// process-wide minimum gain): its tasks' uses differ by orders of
// magnitude, so its history says nothing of one of them. Neither heavy
// nor light, its tasks' gains come from their own holds, progress and
// age.
func (a *Atropos) mixed(class string) bool {
	_, _, _, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds())
	return ok
}

// observeOthers updates, per lock and queue resource, the moving mean of
// the units held and waited for by tasks of classes known to be light on
// it (lightOn).
func (a *Atropos) observeOthers(s *snapshot.Snapshot) {
	alpha := min(float64(s.Window)/float64(time.Second), 1)
	demand := make([]float64, len(s.Resources))
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		for _, u := range usageOf(s, ti) {
			if u.Res < 0 || int(u.Res) >= len(s.Resources) {
				continue
			}
			r := &s.Resources[u.Res]
			if r.Kind != resource.KindQueue && r.Kind != resource.KindLock {
				continue
			}
			if n := u.Held + int64(max(u.Waiting, 0)); n > 0 && a.lightOn(t.Class, r) {
				demand[u.Res] += float64(n)
			}
		}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.Kind != resource.KindQueue && r.Kind != resource.KindLock {
			continue
		}
		k := keyOf(r)
		m, ok := a.others[k]
		if !ok {
			m = demand[i]
		}
		a.others[k] = m + alpha*(demand[i]-m)
	}
	if len(a.others) > 2*len(s.Resources)+64 {
		for k := range a.others {
			if !slices.ContainsFunc(s.Resources, func(r snapshot.Resource) bool { return keyOf(&r) == k }) {
				delete(a.others, k)
			}
		}
	}
}

// gainFloors fills a.gain, per resource of s, the minimum gain in
// seconds that a task's future use of it must reach to be worth a
// cancellation: half the tightest objective among the tasks waiting for
// it whose misses count (a waiter of the default objective counting with
// the process-wide minimum gain), the process-wide minimum gain when no
// such task waits. A cancellation protects the waiters: a culprit that
// releases the resource within half their objective leaves them time to
// meet it, however tight or loose the process default is.
func (a *Atropos) gainFloors(s *snapshot.Snapshot) {
	n := len(s.Resources)
	def := a.cfg.minGain.Seconds()
	a.gain = slices.Grow(a.gain[:0], n)[:n]
	for i := range a.gain {
		a.gain[i] = -1
	}
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !t.HasObjective() {
			continue
		}
		g := def
		if t.Objective > 0 {
			g = t.Objective.Seconds() / 2
		}
		for _, u := range usageOf(s, ti) {
			if i := int(u.Res); u.Waiting > 0 && i >= 0 && i < n && (a.gain[i] < 0 || g < a.gain[i]) {
				a.gain[i] = g
			}
		}
	}
	for i := range a.gain {
		if a.gain[i] < 0 {
			a.gain[i] = def
		}
	}
}

// knownHeavy fills a.khCand, per resource of s, the index of a
// cancellable task of a class known to be heavy on that lock or queue
// resource (see heavyOn), holding it while others wait, when the
// known-heavy tasks' demand oversubscribes it, or -1. Contention measured
// over the window lags an overload by the window's length; known-heavy
// tasks will keep their demand for what is left of their class's use, so
// when that demand (the units they hold and wait for) leaves the others
// less than their mean demand a plus √a (square-root headroom, as for
// re-execution; a lock: any known-heavy holder), the resource counts as
// contended from the acquisition that made it so, and the choice that
// follows (least loss among the candidates that free enough) takes the
// newcomer, which has lost nearly nothing yet, rather than the older
// holder. A class's first task has no history: it is found by the
// measured contention, as before; one known-heavy task that leaves the
// others room is left alone.
func (a *Atropos) knownHeavy(s *snapshot.Snapshot) {
	a.gainFloors(s)
	n := len(s.Resources)
	a.khCand = slices.Grow(a.khCand[:0], n)[:n]
	a.khHeavy = slices.Grow(a.khHeavy[:0], n)[:n]
	any := false
	for i := range s.Resources {
		a.khCand[i], a.khHeavy[i] = -1, 0
		r := &s.Resources[i]
		if r.Waiters > 0 && (r.Kind == resource.KindLock || r.Kind == resource.KindQueue) {
			any = true
		}
	}
	if !any || a.variant == CurrentUsage {
		return
	}
	a.khHeld = slices.Grow(a.khHeld[:0], n)[:n]
	a.khNewcomer = slices.Grow(a.khNewcomer[:0], n)[:n]
	clear(a.khHeld)
	clear(a.khNewcomer)
	newcomer, heavyHeld := a.khNewcomer, a.khHeld
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		for _, u := range usageOf(s, ti) {
			i := int(u.Res)
			if i < 0 || i >= n {
				continue
			}
			r := &s.Resources[i]
			d := u.Held + int64(max(u.Waiting, 0))
			if r.Waiters <= 0 || d <= 0 || (r.Kind != resource.KindLock && r.Kind != resource.KindQueue) || !a.heavyOn(t.Class, r) {
				continue
			}
			a.khHeavy[i] += d
			heavyHeld[i] += max(u.Held, 0)
			if u.Held <= 0 && t.Cancellable && !t.Cancelled && !t.Blocked && r.Kind == resource.KindQueue {
				newcomer[i] = true
			}
			// What is left of its class's use is worth a cancellation;
			// a class known only to use at least its estimate (its
			// tasks are cancelled before they end) may use any more.
			total, _ := a.uses.Total(t.Class, r.Name)
			if a.khCand[i] < 0 && u.Held > 0 && t.Cancellable && !t.Cancelled && !t.Blocked &&
				(total-estimate.Spent(&u.Usage, r.Capacity) >= a.gain[i] || a.uses.AtLeast(t.Class, r.Name)) {
				a.khCand[i] = ti
			}
		}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if a.khCand[i] < 0 || r.Kind == resource.KindLock {
			continue
		}
		if newcomer[i] && heavyHeld[i] < r.Capacity {
			// A known-heavy newcomer waits for its first units: the
			// acquisition that oversubscribes the queue has not
			// happened yet, and the candidate that loses least is the
			// newcomer once it holds a unit (a step or two later, when
			// a light task lets one go), not an older holder cancelled
			// now. Where known-heavy holders hold every unit, the
			// newcomer gets none before they let go: they are decided
			// on now.
			a.khCand[i] = -1
			continue
		}
		o := a.others[keyOf(r)]
		if float64(a.khHeavy[i])+o+math.Sqrt(o) <= float64(r.Capacity) {
			a.khCand[i] = -1
		}
	}
}

// WakeOn names the lock and queue resources on which some class is known
// to be heavy (see knownHeavy): when a task of it holds one, the next
// task to wait there makes it a culprit, and the loop had better see it
// then than at its next tick, however soon after its acquisition that is
// (policy.Waker). A wait behind a light holder steps the loop too, at
// most once a millisecond, and finds nothing to do.
func (a *Atropos) WakeOn(s *snapshot.Snapshot, dst []int) []int {
	if a.variant == CurrentUsage {
		return dst
	}
	if a.heavyRes == nil {
		a.heavyRes = make(map[string]struct{})
	}
	clear(a.heavyRes)
	a.uses.EachHeavy(a.cfg.minGain.Seconds(), func(res string) { a.heavyRes[res] = struct{}{} })
	if len(a.heavyRes) == 0 {
		return dst
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.Kind != resource.KindLock && r.Kind != resource.KindQueue {
			continue
		}
		if _, ok := a.heavyRes[r.Name]; ok {
			dst = append(dst, i)
		}
	}
	return dst
}

// confirms reports whether resource r at contention level counts as
// contended: at the threshold, and, for a lock or queue, waited for now.
func (a *Atropos) confirms(r *snapshot.Resource, level float64) bool {
	return level >= a.cfg.minContention && (r.Kind == resource.KindMemory || r.Waiters > 0)
}

// Level is one resource's contention level in an [Evaluation].
type Level struct {
	Resource  string
	Kind      resource.Kind
	Level     float64 // C_r in [0, 1]
	Waiters   int
	Contended bool
	// Episode is set when a cancelled task's holds on the resource have
	// not yet been seen released: it is not decided on (not Contended).
	Episode bool
	// KnownHeavy is set when tasks of classes known to be heavy on the
	// resource leave the others too little while they wait (see the
	// package documentation, "Known-heavy classes"): it counts as
	// contended whatever its level, and a decision on it is taken without
	// the confirmation time.
	KnownHeavy bool
	// MinGain is the least future use of it that makes a task a
	// candidate: half the tightest objective of the tasks waiting for it,
	// or the policy's default (see WithMinGain). Memory resources have
	// none (WithMinEvictionShare).
	MinGain time.Duration
}

// Candidate is a task the policy considered, with its gains on the
// contended resources (in the order of Evaluation.Contended).
type Candidate struct {
	Task     uint64
	Class    string
	Key      string
	Progress float64
	Source   estimate.Source
	Usage    []float64 // future (or current, for CurrentUsage) usage per contended resource
	Share    []float64 // Usage as a share of all candidates' on that resource
	Score    float64   // Σ_r C_r · Share_r
	// Dominated is set when another candidate gains at least as much on
	// every contended resource and loses no more, and is better on one
	// (MultiObjective; CurrentUsage weighs gains only).
	Dominated bool
	// Loss is the work its cancellation throws away: its use so far, in
	// seconds of the whole resource summed over its resources (see
	// estimate.Spent); Elapsed its age.
	Loss    float64
	Elapsed time.Duration
	// Sufficient is set when cancelling it alone frees enough of the
	// main resource (Evaluation.Main): the other candidates leave room.
	Sufficient bool
	// Future says where its future use came from.
	Future FutureSource
	// Background is set for a background task (task.Background): while
	// one is a candidate, only background candidates are chosen from.
	Background bool
	// Why it was not chosen ("" for the chosen).
	Why string
}

// MixedClass is a class whose tasks use a resource in amounts that differ
// by orders of magnitude (estimate.Uses.Mixed): typically Typical
// resource-seconds, while one of them used Peak. Its history is not
// trusted: neither a newcomer's gain nor an old holder's end is taken
// from it.
type MixedClass struct {
	Class, Resource string
	Typical, Peak   float64
}

// Excluded is a task left out of the candidates, with the reason.
type Excluded struct {
	Task  uint64
	Class string
	Why   string
}

// Evaluation is everything a decision rests on: the explanation a decision
// carries, computed on its own by [Atropos.Evaluate].
type Evaluation struct {
	Levels []Level
	// Contended indexes into Levels the resources the decision weighs:
	// those at a tenth of the contention threshold or more, once one has
	// reached it (Greedy: the most contended one only).
	Contended []int
	// Main indexes into Contended the most contended resource: the one a
	// candidate must free enough of to be chosen for its small loss.
	Main int
	// Candidates, best first (by score, or by gain on the most contended
	// resource for Greedy): all of them from [Atropos.Evaluate], the first
	// few in a decision's explanation.
	Candidates []Candidate
	Total      int // candidates in all
	Skyline    int // non-dominated candidates
	// Why tasks were left out: not marked cancellable, already cancelled,
	// waiting behind another task (cancellable, but the blame for their
	// wait is the holder's), or freeing nothing contended.
	NotCancellable, AlreadyCancelled, WaitingBehind, NoGain int
	// NoGainTasks lists the first few tasks left out for no gain that hold
	// a contended resource (the tasks that only wait are counted only).
	NoGainTasks []Excluded
	// Mixed lists the first few classes of the tasks weighed whose history
	// was not trusted (see estimate.Uses.Mixed).
	Mixed  []MixedClass
	Chosen int // index into Candidates, -1 for none
	Reason string
}

// Evaluate runs the policy on s and returns its full reasoning. It does
// not modify s.
func (a *Atropos) Evaluate(s *snapshot.Snapshot) Evaluation {
	ev := Evaluation{Chosen: -1}
	a.evaluate(s, &ev, math.MaxInt)
	return ev
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

// maxDiagnosedMixed bounds the classes reported mixed once.
const maxDiagnosedMixed = 1024

// diagnoseMixed returns a Diagnose decision for each class found mixed
// (see [MixedClass]) since the last step, once per class: the operator
// learns that the class merges work of different weights, which a class
// of its own per route (httpmw.WithClass, or the middleware around the
// mux that routes) would tell apart.
func (a *Atropos) diagnoseMixed() []policy.Decision {
	if a.variant == CurrentUsage {
		return nil
	}
	var ds []policy.Decision
	a.uses.Risen(func(class string) {
		if a.mixedSaid[class] || len(a.mixedSaid) >= maxDiagnosedMixed {
			return
		}
		res, typ, peak, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds())
		if !ok {
			return
		}
		if a.mixedSaid == nil {
			a.mixedSaid = map[string]bool{}
		}
		a.mixedSaid[class] = true
		ds = append(ds, policy.Decision{Policy: a.Name(), Action: policy.Diagnose, Class: class,
			Reason: fmt.Sprintf("class %q is mixed: its tasks use %.4g resource-s of %s typically, one used %.4g; its history is not trusted for gains and losses (they come from each task's own holds, progress and age); give each kind of work a class of its own (the route: httpmw.Handler around the ServeMux that routes it, or httpmw.WithClass)",
				class, typ, res, peak),
			Details: []slog.Attr{slog.String("resource", res), slog.Float64("typical_resource_s", typ), slog.Float64("peak_resource_s", peak)}})
	})
	return ds
}

// cand is the compact working form of a candidate: the policy sorts and
// compares these, and builds [Candidate]s only for the ones it reports.
type cand struct {
	score, total float64 // Σ C_r·share_r, Σ share_r (and the keep dimension)
	task         int32   // index into the snapshot's tasks
	off          int32   // its shares: a.vals[off : off+dims], then its keep value
	progress     float64
	source       estimate.Source
	dominated    bool
	support      uint64 // bit d set when the value on dimension d is positive (dims ≤ 64)
	loss         float64
	held         int64 // units of the main resource held and waited for
	sufficient   bool
	background   bool // a Background task: chosen before any foreground one
	future       FutureSource
	mixed        bool // its class's history was not trusted
}

// noteMixed lists class in ev.Mixed, once, up to maxListed classes.
func (a *Atropos) noteMixed(ev *Evaluation, class string) {
	if len(ev.Mixed) >= maxListed || slices.ContainsFunc(ev.Mixed, func(m MixedClass) bool { return m.Class == class }) {
		return
	}
	if res, typ, peak, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds()); ok {
		ev.Mixed = append(ev.Mixed, MixedClass{Class: class, Resource: res, Typical: typ, Peak: peak})
	}
}

// FutureSource says where a candidate's future use came from.
type FutureSource uint8

const (
	// FromProgress: use so far × (1−p)/p, p from the task's progress.
	FromProgress FutureSource = iota + 1
	// FromClassUse: its class's learned total use minus its use so far.
	FromClassUse
	// FromDemand: no history; it holds what makes the resource full.
	FromDemand
)

// String returns the source's name.
func (f FutureSource) String() string {
	switch f {
	case FromProgress:
		return "progress"
	case FromClassUse:
		return "class-use"
	case FromDemand:
		return "demand"
	}
	return "unknown"
}

// evaluate fills ev with the policy's reasoning on s: the contention
// levels, the candidates (the first limit of them, best first) and the
// choice. Each step is a method of its own, below.
func (a *Atropos) evaluate(s *snapshot.Snapshot, ev *Evaluation, limit int) {
	main := a.contended(s, ev)
	if main < 0 {
		return
	}
	a.dimensions(s, ev, main)
	dims := len(ev.Contended)
	totals := make([]float64, dims)
	maxLoss := a.candidates(s, ev, main, totals)
	if len(a.work) == 0 {
		ev.Reason = "no cancellable task would free a contended resource"
		return
	}
	a.shares(ev, &s.Resources[main], totals, maxLoss)
	order, best, leastLoss := a.choose(s, ev, limit)
	a.report(s, ev, &s.Resources[main], order, best, totals, limit)
	ev.Chosen = 0
	ev.Reason = a.reason(ev, leastLoss)
}

// contended computes each resource's contention level into ev.Levels, the
// resources the decision weighs into ev.Contended (Greedy: the most
// contended one only) and ev.Main, and returns the index in s.Resources of
// the most contended resource, or -1 (ev.Reason set) when none is
// contended outside an episode.
func (a *Atropos) contended(s *snapshot.Snapshot, ev *Evaluation) int {
	a.contention(s)
	a.knownHeavy(s)
	main := -1
	for i := range s.Resources {
		r := &s.Resources[i]
		l := Level{Resource: r.Name, Kind: r.Kind, Level: a.levels[i], Waiters: r.Waiters}
		if r.Kind != resource.KindMemory {
			l.MinGain = time.Duration(a.gain[i] * float64(time.Second))
		}
		// With no detector firing (s.Quiet), only known-heavy tasks are
		// acted on: measured contention waits for an overload detector.
		l.Contended = a.confirms(r, l.Level) && !s.Quiet
		// Known-heavy tasks that leave the others too little make the
		// resource contended whatever its level, and the decision on it
		// needs no confirmation, whether or not the measured contention
		// has also reached the threshold.
		if a.khCand[i] >= 0 {
			l.Contended, l.KnownHeavy = true, true
		}
		if l.Contended && a.inEpisode(r) {
			l.Contended, l.Episode = false, true
		}
		ev.Levels = append(ev.Levels, l)
		if ((l.Level >= a.cfg.minContention/10 && !s.Quiet) || l.KnownHeavy) && !l.Episode {
			ev.Contended = append(ev.Contended, i)
		}
		if l.Contended && (main < 0 || l.Level > ev.Levels[main].Level ||
			(l.Level == ev.Levels[main].Level && ev.Levels[main].KnownHeavy && !l.KnownHeavy)) {
			main = i
		}
	}
	if main < 0 {
		ev.Contended = ev.Contended[:0]
		ev.Reason = "no contended resource"
		if slices.ContainsFunc(ev.Levels, func(l Level) bool { return l.Episode }) {
			ev.Reason = "no contended resource outside an episode: a cancelled task's use has not been seen to come back"
		}
		return main
	}
	if a.variant == Greedy {
		// Only the most contended resource counts.
		ev.Contended = append(ev.Contended[:0], main)
	}
	ev.Main = slices.Index(ev.Contended, main)
	return main
}

// dimensions maps each resource of s to its dimension among ev.Contended,
// or -1 (a.dimOf), and sets each dimension's minimum gain (a.floor): a
// share of the capacity for memory, the resource's minimum gain in seconds
// otherwise (gainFloors: from the objectives of the tasks waiting for it).
func (a *Atropos) dimensions(s *snapshot.Snapshot, ev *Evaluation, main int) {
	// dimOf maps a resource index to its dimension, or -1.
	a.dimOf = a.dimOf[:0]
	for range s.Resources {
		a.dimOf = append(a.dimOf, -1)
	}
	floor := a.floor[:0]
	for d, i := range ev.Contended {
		a.dimOf[i] = int32(d)
		r := &s.Resources[i]
		if r.Kind == resource.KindMemory {
			floor = append(floor, a.cfg.minEvictShare*float64(max(r.Capacity, r.InUse, 1)))
		} else {
			floor = append(floor, a.gain[i])
		}
	}
	a.floor = floor
}

// candidates computes the candidates (a.work) and their future use of each
// contended resource (a.vals, dims values then a free one for the keep
// dimension per candidate), counts in ev the tasks left out and why, adds
// each dimension's future use into totals and returns the largest loss.
// main is the most contended resource's index in s.Resources.
func (a *Atropos) candidates(s *snapshot.Snapshot, ev *Evaluation, main int, totals []float64) (maxLoss float64) {
	dims := len(ev.Contended)
	cands, vals := a.work[:0], a.vals[:0]
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		switch {
		case !t.Cancellable:
			ev.NotCancellable++
			continue
		case t.Cancelled:
			ev.AlreadyCancelled++
			continue
		case t.Blocked:
			// Waiting behind another task: the blame is that task's.
			ev.WaitingBehind++
			continue
		}
		first, n := int(t.First), int(t.N)
		if first < 0 || n < 0 || first+n > len(s.Usage) {
			ev.NoGain++
			continue
		}
		off := len(vals)
		vals = slices.Grow(vals, dims+1)[:off+dims+1]
		usage := vals[off : off+dims]
		clear(vals[off:])
		c := cand{task: int32(ti), off: int32(off), background: t.Kind == task.Background}
		any, holds := a.future(s, t, main, usage, &c)
		if c.mixed && holds {
			a.noteMixed(ev, t.Class)
		}
		if !any {
			vals = vals[:off]
			ev.NoGain++
			if holds && len(ev.NoGainTasks) < maxListed {
				ev.NoGainTasks = append(ev.NoGainTasks, Excluded{Task: t.ID, Class: t.Class, Why: "no gain: expected to release the contended resources within the minimum gain"})
			}
			continue
		}
		for d, v := range usage {
			totals[d] += v
		}
		c.loss, _ = estimate.Loss(s, ti)
		maxLoss = max(maxLoss, c.loss)
		cands = append(cands, c)
	}
	a.work, a.vals = cands, vals
	return maxLoss
}

// future adds task t's expected future use of each contended resource
// into usage (by dimension; a use below the dimension's minimum gain
// counts for nothing) and sets c's progress, its source, its demand on the
// main resource (held) and where its future use came from. It reports
// whether t would free any contended resource, and whether it uses one
// at all.
func (a *Atropos) future(s *snapshot.Snapshot, t *snapshot.Task, main int, usage []float64, c *cand) (any, holds bool) {
	floor := a.floor
	var held int64
	p, src, factor := -1.0, estimate.Source(0), 1.0
	fsrc := FutureSource(0)
	// A mixed class's history says nothing of this task: its progress
	// is its own (reported, else half done at its age) and its future
	// use its own holds', or the resource's demand.
	mixed := a.variant != CurrentUsage && a.mixed(t.Class)
	durations := a.cfg.durations
	if mixed {
		durations = nil
	}
	c.mixed = mixed
	first, n := int(t.First), int(t.N)
	for ui := first; ui < first+n; ui++ {
		u := &s.Usage[ui]
		if u.Res < 0 || int(u.Res) >= len(s.Resources) {
			continue
		}
		d := a.dimOf[u.Res]
		if d < 0 {
			continue
		}
		r := &s.Resources[u.Res]
		if int(u.Res) == main && u.Held > 0 {
			// Its demand on the main resource: what it holds and what
			// its waits in progress want (a unit each at least).
			held += u.Held + int64(max(u.Waiting, 0))
		}
		v := estimate.Current(u, r) // finite, ≥ 0
		if !(v > 0) {
			continue
		}
		holds = true
		if p < 0 {
			p, src = estimate.Progress(t, durations)
			if a.variant != CurrentUsage {
				factor = estimate.Future(1, p) // (1−p)/p, p already clamped
			}
		}
		fut, fs := v*factor, FromProgress
		if a.variant != CurrentUsage && r.Kind != resource.KindMemory {
			total, ok := a.uses.Total(t.Class, r.Name)
			// A mixed class's history is not this task's, but for a
			// task holding one unit with no progress of its own: a
			// light request stalled while it holds is still not a
			// culprit (the heavy members of a merged class hold
			// several units, or report progress).
			ok = ok && (!mixed || (u.Held < 2 && src == estimate.Lindy))
			// A class known only to use at least its total (its tasks
			// were cancelled before they ended): a bound under the
			// minimum gain says nothing, one over it is a heavy class
			// with at least the minimum gain left.
			bound := ok && a.uses.AtLeast(t.Class, r.Name)
			if ok && !(bound && total < floor[d]) {
				// A class seen to end: what is left of its use, when it
				// promises more than the progress does. A task that has
				// outlived its class's typical use is not about to end:
				// its progress (conditioned on its age) decides then —
				// unless the progress is the half-done guess and the
				// class's tasks end having used less than the minimum
				// gain: a request of a class that holds for a
				// millisecond, stalled by the scheduler while it holds,
				// is not a culprit.
				left := total - estimate.Spent(&u.Usage, r.Capacity)
				switch {
				case src == estimate.Lindy && total < floor[d]:
					fut, fs = max(left, 0), FromClassUse
				case left > fut:
					fut, fs = left, FromClassUse
				}
				if bound && fut < floor[d] {
					fut, fs = floor[d], FromClassUse
				}
			} else if oversubscribes(u, r) && fut < floor[d] {
				// No history: the resource's current demand decides.
				fut, fs = floor[d], FromDemand
			}
		}
		if fut >= floor[d] && fut > 0 {
			usage[d] += fut
			any = true
			if fs > fsrc {
				fsrc = fs
			}
		}
	}
	c.progress, c.source, c.held, c.future = p, src, held, fsrc
	return any, holds
}

// shares turns each candidate's future use into shares of the dimension's
// total (in place in a.vals), sets its keep value (MultiObjective), its
// score (Σ level·share), its total, its support and whether it frees
// enough of the main resource mr alone.
func (a *Atropos) shares(ev *Evaluation, mr *snapshot.Resource, totals []float64, maxLoss float64) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	// Usage becomes shares in place (dominance is the same on both: each
	// dimension is scaled by a positive constant), then scores. The last
	// dimension is what a cancellation keeps: 1 − loss/maxLoss, so that
	// losing less is better, as gaining more is.
	weight := make([]float64, dims)
	inv := make([]float64, dims)
	for d, ri := range ev.Contended {
		weight[d] = ev.Levels[ri].Level
		if totals[d] > 0 {
			inv[d] = 1 / totals[d]
		}
	}
	lossDim := a.variant == MultiObjective
	var heavy int64
	for i := range cands {
		heavy += cands[i].held
	}
	for i := range cands {
		c := &cands[i]
		sh := vals[c.off : int(c.off)+dims+1]
		var total, score float64
		var support uint64
		for d, v := range sh[:dims] {
			if v == 0 {
				continue
			}
			v *= inv[d]
			sh[d] = v
			if d < 64 {
				support |= 1 << d
			}
			total += v
			score += weight[d] * v
		}
		if lossDim {
			keep := 1.0
			if maxLoss > 0 {
				keep = 1 - c.loss/maxLoss
			}
			sh[dims] = keep
			total += keep
			if keep > 0 && dims < 64 {
				support |= 1 << dims
			}
		}
		c.total, c.score, c.support = total, score, support
		c.sufficient = sufficient(mr, c.held, heavy, sh[ev.Main])
	}
}

// choose ranks the candidates best first, marking the dominated ones
// (except for Greedy), sets ev.Skyline and ev.Total, and returns the
// candidates in report order (at least the first limit of them), the
// chosen first, with the least-loss choice among those that free enough of
// the main resource (MultiObjective; -1 when none does: the best score,
// first in order, is chosen).
func (a *Atropos) choose(s *snapshot.Snapshot, ev *Evaluation, limit int) (order []int32, best int32, leastLoss bool) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	ids := func(i int32) uint64 { return s.Tasks[cands[i].task].ID }
	rd := dims
	if a.variant == MultiObjective {
		rd++
	}
	order, sky := a.rank(cands, vals, rd, limit, a.variant != Greedy, ids)
	ev.Skyline = sky
	ev.Total = len(cands)

	// Background work goes first: while a background task is a
	// candidate, the choice is among the background candidates alone,
	// by the same rule.
	bg := slices.ContainsFunc(cands, func(c cand) bool { return c.background })
	eligible := func(c *cand) bool { return !bg || c.background }
	// The choice: among the candidates that free enough of the main
	// resource, the one losing least (a candidate dominated by one that
	// does not free enough may be it); when none does alone, the best
	// score, which is never dominated (among background candidates: the
	// best-ranked one).
	best = -1
	if a.variant == MultiObjective {
		for i := range cands {
			c := &cands[i]
			if !c.sufficient || !eligible(c) {
				continue
			}
			if best < 0 || c.loss < cands[best].loss ||
				(c.loss == cands[best].loss && better(cands, int32(i), best, ids) < 0) {
				best = int32(i)
			}
		}
	}
	leastLoss = best >= 0
	if best < 0 && bg {
		for i := range cands {
			if cands[i].background && (best < 0 || better(cands, int32(i), best, ids) < 0) {
				best = int32(i)
			}
		}
	}
	if best >= 0 {
		// The chosen first, then the others in order.
		k := slices.Index(order, best)
		if k < 0 {
			order = append(order, 0)
			k = len(order) - 1
		}
		copy(order[1:k+1], order[:k])
		order[0] = best
		a.order = order
	}
	return order, best, leastLoss
}

// report appends to ev.Candidates the first limit candidates of order,
// each with its future use, its shares and why it was not chosen (the
// first is the chosen; best is the least-loss choice or -1, mr the main
// resource).
func (a *Atropos) report(s *snapshot.Snapshot, ev *Evaluation, mr *snapshot.Resource, order []int32, best int32, totals []float64, limit int) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	for k, i := range order[:min(limit, len(order))] {
		c := &cands[i]
		t := &s.Tasks[c.task]
		share := slices.Clone(vals[c.off : int(c.off)+dims])
		usage := make([]float64, dims)
		for d := range share {
			usage[d] = share[d] * totals[d]
		}
		why := ""
		switch {
		case k == 0:
		case cands[order[0]].background && !c.background:
			why = "foreground: a background task is a candidate, and background work is cancelled first"
		case c.dominated:
			why = "dominated: another candidate frees at least as much of every contended resource and loses no more"
		case !c.sufficient:
			why = "insufficient: " + mr.Name + " stays full without it"
		case best >= 0 && k > 0:
			why = "loses at least as much as the chosen"
		}
		ev.Candidates = append(ev.Candidates, Candidate{
			Task: t.ID, Class: t.Class, Key: t.Key, Progress: c.progress, Source: c.source,
			Usage: usage, Share: share, Score: c.score, Dominated: c.dominated,
			Loss: c.loss, Elapsed: t.Age, Sufficient: c.sufficient, Future: c.future, Background: c.background, Why: why,
		})
	}
}

// maxListed bounds the tasks an explanation lists as excluded.
const maxListed = 8

// oversubscribes reports whether usage u holds what makes queue resource r
// full: more than one unit (a waiter's request is typically one), r full
// with it and not full without it.
func oversubscribes(u *snapshot.Usage, r *snapshot.Resource) bool {
	if r.Capacity <= 1 || u.Held < 2 {
		return false
	}
	return r.Held >= r.Capacity && r.Held-u.Held < r.Capacity
}

// sufficient reports whether cancelling a candidate holding and waiting
// for held units of the main resource r frees enough of it, heavy being
// the units all candidates hold and wait for there and share the candidate's share of the
// candidates' future use of it: for a lock or queue, the other candidates
// then leave room (the light tasks' demand needs a unit at least; a lock
// is room only when no other candidate holds it); for a resource whose
// units are not held (memory, CPU or IO without a capacity), it frees
// most of the candidates' future use.
func sufficient(r *snapshot.Resource, held, heavy int64, share float64) bool {
	switch r.Kind {
	case resource.KindLock, resource.KindQueue:
		if held <= 0 {
			return false
		}
		return heavy-held < max(r.Capacity, 1)
	}
	return share >= 0.5
}

// topSize is how many of the best candidates the skyline's pre-filter
// compares every other candidate with.
const topSize = 32

// rank orders the candidates best first (by score, then total share, then
// task ID; a dominator has a score at least as high and a larger total, so
// it always ranks first) and, with skyline, marks the dominated ones. It
// returns at least the first limit candidates in order, and the number of
// non-dominated candidates (all of them without skyline).
//
// The skyline is a sort-first one (a candidate is compared with the
// non-dominated candidates ranked before it; transitivity makes that
// enough), behind a pre-filter: the topSize best candidates, found in one
// pass, are compared with every other one first. On the skewed data of a
// real snapshot (a few tasks hold much, most hold little) they dominate
// nearly every candidate, and only the survivors are sorted. A candidate
// the pre-filter removes is dominated, and so is anything it would have
// dominated, so the survivors' skyline is the skyline.
func (a *Atropos) rank(cands []cand, vals []float64, dims, limit int, skyline bool, id func(int32) uint64) ([]int32, int) {
	better := func(x, y int32) int { return better(cands, x, y, id) }
	order := a.order[:0]
	n := len(cands)
	if n <= 2*topSize || limit > topSize {
		for i := range n {
			order = append(order, int32(i))
		}
	} else {
		// The topSize best, by insertion into a sorted slice.
		top := a.top[:0]
		for i := range int32(n) {
			if len(top) == topSize && better(i, top[topSize-1]) >= 0 {
				continue
			}
			j, _ := slices.BinarySearchFunc(top, i, better)
			if len(top) < topSize {
				top = append(top, 0)
			}
			copy(top[j+1:], top[j:len(top)-1])
			top[j] = i
		}
		a.top = top
		inTop := a.inTop(n, top)
		for i := range int32(n) {
			if inTop[i] {
				order = append(order, i)
				continue
			}
			if skyline {
				v := vals[cands[i].off : int(cands[i].off)+dims]
				for _, t := range top {
					o := cands[t].off
					if cands[i].support&^cands[t].support == 0 && dominates(vals[o:int(o)+dims], v) {
						cands[i].dominated = true
						break
					}
				}
			}
			if skyline && !cands[i].dominated {
				order = append(order, i)
			}
		}
	}
	slices.SortFunc(order, better)
	a.order = order
	if !skyline {
		return order, n
	}
	sky := a.sky[:0]
	for _, i := range order {
		c := &cands[i]
		if c.dominated {
			continue
		}
		v := vals[c.off : int(c.off)+dims]
		for _, j := range sky {
			o := cands[j].off
			if c.support&^cands[j].support == 0 && dominates(vals[o:int(o)+dims], v) {
				c.dominated = true
				break
			}
		}
		if !c.dominated {
			sky = append(sky, i)
		}
	}
	a.sky = sky[:0]
	return order, len(sky)
}

// better orders candidates x and y best first: by score, then total
// share, then task ID.
func better(cands []cand, x, y int32, id func(int32) uint64) int {
	cx, cy := &cands[x], &cands[y]
	if c := cmp.Compare(cy.score, cx.score); c != 0 {
		return c
	}
	if c := cmp.Compare(cy.total, cx.total); c != 0 {
		return c
	}
	return cmp.Compare(id(x), id(y))
}

// The support test above (a candidate can only dominate one whose positive
// dimensions are among its own) is exact when dims ≤ 64; beyond, the bits
// of the dimensions past 64 are not set, and the test still never rejects a
// true dominator.

// inTop returns a reusable table of which of n candidates are in top.
func (a *Atropos) inTop(n int, top []int32) []bool {
	t := a.topSet[:0]
	for range n {
		t = append(t, false)
	}
	for _, i := range top {
		t[i] = true
	}
	a.topSet = t
	return t
}

// dominates reports whether a is at least b everywhere and more somewhere.
func dominates(a, b []float64) bool {
	more := false
	for i, x := range a {
		y := b[i]
		if x < y {
			return false
		}
		if x > y {
			more = true
		}
	}
	return more
}

func (a *Atropos) reason(ev *Evaluation, leastLoss bool) string {
	c := &ev.Candidates[ev.Chosen]
	var frees []string
	for d, i := range ev.Contended {
		if c.Share[d] > 0 {
			frees = append(frees, fmt.Sprintf("%.0f%% of %s (contention %.2f)", 100*c.Share[d], ev.Levels[i].Resource, ev.Levels[i].Level))
		}
	}
	what := "future"
	if a.variant == CurrentUsage {
		what = "current"
	}
	among := fmt.Sprintf("%d candidate(s)", ev.Total)
	if a.variant != Greedy {
		among = fmt.Sprintf("%d non-dominated of %d candidate(s)", ev.Skyline, ev.Total)
	}
	how := "best of " + among
	if leastLoss {
		how = "least loss among those that free enough, of " + among
	}
	if c.Background {
		how = "background work first; " + how
	}
	if l := &ev.Levels[ev.Contended[ev.Main]]; l.KnownHeavy {
		if l.Level < a.cfg.minContention {
			how += fmt.Sprintf("; %s counted as contended before its level reached the threshold: tasks of classes known to be heavy on it leave the others too little while %d wait", l.Resource, l.Waiters)
		} else {
			how += fmt.Sprintf("; decided without confirmation: tasks of classes known to be heavy on %s leave the others too little while %d wait", l.Resource, l.Waiters)
		}
	}
	for _, m := range ev.Mixed {
		how += fmt.Sprintf("; class %q is mixed (its tasks use %.4g resource-s of %s typically, one used %.4g): its history is not trusted, its tasks' gains and losses come from their own holds, progress and age",
			m.Class, m.Typical, m.Resource, m.Peak)
	}
	return fmt.Sprintf("class %q frees %s of the %s use (from %s), loses %.3f resource-s after %v, progress %.2f (%s); %s",
		c.Class, strings.Join(frees, " and "), what, c.Future, c.Loss, c.Elapsed.Round(time.Millisecond), c.Progress, c.Source, how)
}

// Attrs returns the explanation as structured attributes, listing at most
// the first n candidates (the chosen first), each with its gains and its
// loss side by side, and the tasks left out for no gain.
func (ev *Evaluation) Attrs(n int) []slog.Attr {
	var lv []slog.Attr
	for _, l := range ev.Levels {
		if l.Level > 0 || l.Contended || l.Episode {
			lv = append(lv, slog.Group(l.Resource,
				slog.Float64("level", round3(l.Level)),
				slog.Int("waiters", l.Waiters),
				slog.Bool("contended", l.Contended),
				slog.Bool("known_heavy", l.KnownHeavy),
				slog.Bool("episode", l.Episode),
				slog.Duration("min_gain", l.MinGain)))
		}
	}
	out := []slog.Attr{
		{Key: "contention", Value: slog.GroupValue(lv...)},
		slog.Int("candidates", ev.Total),
		slog.Int("non_dominated", ev.Skyline),
		slog.Group("excluded",
			slog.Int("not_cancellable", ev.NotCancellable),
			slog.Int("already_cancelled", ev.AlreadyCancelled),
			slog.Int("waiting_behind_another", ev.WaitingBehind),
			slog.Int("no_gain", ev.NoGain),
			slog.Int("dominated", ev.Total-ev.Skyline)),
	}
	var cs []slog.Attr
	for i := range ev.Candidates[:min(n, len(ev.Candidates))] {
		c := &ev.Candidates[i]
		var gains []slog.Attr
		for d, ri := range ev.Contended {
			gains = append(gains, slog.Float64(ev.Levels[ri].Resource, round3(c.Share[d])))
		}
		attrs := []any{
			slog.Uint64("task", c.Task),
			slog.String("class", c.Class),
			slog.Float64("progress", round3(c.Progress)),
			slog.String("progress_from", c.Source.String()),
			slog.String("future_from", c.Future.String()),
			slog.Float64("score", round3(c.Score)),
			slog.Attr{Key: "gains", Value: slog.GroupValue(gains...)},
			slog.Float64("loss_resource_s", round3(c.Loss)),
			slog.Duration("elapsed", c.Elapsed),
			slog.Bool("sufficient", c.Sufficient),
			slog.Bool("background", c.Background),
			slog.Bool("dominated", c.Dominated),
			slog.Bool("chosen", i == ev.Chosen),
		}
		if c.Why != "" {
			attrs = append(attrs, slog.String("why_not", c.Why))
		}
		cs = append(cs, slog.Group(fmt.Sprintf("#%d", i+1), attrs...))
	}
	out = append(out, slog.Attr{Key: "top", Value: slog.GroupValue(cs...)})
	if len(ev.NoGainTasks) > 0 {
		var ng []slog.Attr
		for _, x := range ev.NoGainTasks {
			ng = append(ng, slog.Group(strconv.FormatUint(x.Task, 10), slog.String("class", x.Class), slog.String("why", x.Why)))
		}
		out = append(out, slog.Attr{Key: "no_gain", Value: slog.GroupValue(ng...)})
	}
	if len(ev.Mixed) > 0 {
		var mx []slog.Attr
		for _, m := range ev.Mixed {
			mx = append(mx, slog.Group(m.Class, slog.String("resource", m.Resource),
				slog.Float64("typical_resource_s", m.Typical), slog.Float64("peak_resource_s", m.Peak)))
		}
		out = append(out, slog.Attr{Key: "mixed_classes", Value: slog.GroupValue(mx...)})
	}
	return out
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

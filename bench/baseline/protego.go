package baseline

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// protegoConfig is what ProtegoOptions set.
type protegoConfig struct {
	maxDrops int // 0: no cap
}

// A ProtegoOption configures [NewProtego].
type ProtegoOption func(*protegoConfig)

// WithProtegoMaxDrops caps the number of tasks one call to [Protego.Decide]
// proposes: when more tasks qualify, the ones with the lowest IDs are
// proposed. A value of zero or less means no cap, the default.
func WithProtegoMaxDrops(n int) ProtegoOption {
	return func(c *protegoConfig) { c.maxDrops = max(n, 0) }
}

// Protego is the Protego-like victim-dropping policy: it cancels the
// cancellable tasks whose wait in progress at one lock or queue has reached
// the delay budget. See the package documentation.
//
// Decide may be called from any goroutine, and concurrently; a Protego
// remembers, between calls, where each task's wait in progress began.
type Protego struct {
	budget time.Duration
	cfg    protegoConfig

	mu sync.Mutex
	// marks are, per task and resource seen in the last snapshot, the
	// task's waits begun there and its accumulated wait there before the
	// wait in progress (or, when it waited for nothing, all of it).
	marks map[waitKey]waitMark
}

type waitKey struct {
	task uint64
	res  task.ResourceID
}

type waitMark struct {
	waits   int64
	before  time.Duration
	waiting bool
}

var _ policy.Policy = (*Protego)(nil)

// NewProtego returns the Protego-like victim-dropping policy: Decide
// proposes to cancel every cancellable, not yet cancelled task that is
// waiting now on a resource of kind [resource.KindLock] or
// [resource.KindQueue] and has waited there, in this one wait, for budget
// or more: Protego's delay budget per lock, which its active
// synchronization queue management enforces on each lock's wait queue.
// Earlier waits, there or elsewhere, do not count: a task that queues
// briefly many times (a background job taking a lock between batches) is
// not a victim however much its short waits add up to. NewProtego panics
// if budget is not positive, as time.NewTicker does for its period.
func NewProtego(budget time.Duration, opts ...ProtegoOption) *Protego {
	if budget <= 0 {
		panic("cancel: non-positive Protego budget")
	}
	p := &Protego{budget: budget}
	for _, o := range opts {
		o(&p.cfg)
	}
	return p
}

// Name returns "protego".
func (p *Protego) Name() string { return "protego" }

// Budget returns the delay budget.
func (p *Protego) Budget() time.Duration { return p.budget }

// current returns how long the wait in progress of u (a usage entry of
// the task with ID id) has lasted, and records where it began. A wait
// whose start fell between two snapshots is told from the count of waits
// begun: when one wait began since the last snapshot, the accumulated wait
// then is what came before it; a task first seen in its first wait waited
// all of its accumulated wait in it; for one first seen later, the
// earlier waits are taken to be as long as the mean.
func (p *Protego) current(next map[waitKey]waitMark, id uint64, u task.Usage) time.Duration {
	k := waitKey{id, u.Resource}
	if u.Waiting <= 0 {
		next[k] = waitMark{waits: u.Waits, before: u.Wait}
		return 0
	}
	m, seen := p.marks[k]
	switch {
	case seen && m.waiting && u.Waits == m.waits:
		// The same wait as at the last snapshot.
	case seen && !m.waiting && u.Waits == m.waits+1:
		m = waitMark{waits: u.Waits, before: m.before, waiting: true}
	case seen:
		// More than one wait began since: the ones that ended in between
		// lasted less than the time between the snapshots.
		m = waitMark{waits: u.Waits, before: m.before, waiting: true}
	case u.Waits <= 1:
		m = waitMark{waits: u.Waits, waiting: true}
	default:
		m = waitMark{waits: u.Waits, before: u.Wait * time.Duration(u.Waits-1) / time.Duration(u.Waits), waiting: true}
	}
	next[k] = m
	return max(u.Wait-m.before, 0)
}

// Decide returns one [policy.Cancel] decision for each task to drop, in
// increasing order of task ID, or nil if there is none. Usage entries that
// refer to no resource of s are ignored. Decide does not modify s.
func (p *Protego) Decide(s *snapshot.Snapshot) []policy.Decision {
	type victim struct {
		i           int
		wait        time.Duration // the wait in progress over the budget
		lock, queue time.Duration // every wait, for the record
		on          string        // where it waits
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[waitKey]waitMark, len(p.marks))
	var victims []victim
	for i := range s.Tasks {
		t := &s.Tasks[i]
		first, n := int(t.First), int(t.N)
		if first < 0 || n <= 0 || first+n > len(s.Usage) {
			continue
		}
		v := victim{i: i}
		for _, u := range s.Usage[first : first+n] {
			if u.Res < 0 || int(u.Res) >= len(s.Resources) {
				continue
			}
			r := &s.Resources[u.Res]
			switch r.Kind {
			case resource.KindLock:
				v.lock += u.Wait
			case resource.KindQueue:
				v.queue += u.Wait
			default:
				continue
			}
			if w := p.current(next, t.ID, u.Usage); w >= p.budget && w > v.wait {
				v.wait, v.on = w, r.Name
			}
		}
		if v.on == "" || !t.Cancellable || t.Cancelled {
			continue
		}
		victims = append(victims, v)
	}
	p.marks = next
	if len(victims) == 0 {
		return nil
	}
	slices.SortFunc(victims, func(a, b victim) int {
		return cmp.Compare(s.Tasks[a.i].ID, s.Tasks[b.i].ID)
	})
	if p.cfg.maxDrops > 0 && len(victims) > p.cfg.maxDrops {
		victims = victims[:p.cfg.maxDrops]
	}
	out := make([]policy.Decision, 0, len(victims))
	for _, v := range victims {
		t := &s.Tasks[v.i]
		out = append(out, policy.Decision{
			Policy: p.Name(),
			Action: policy.Cancel,
			Task:   t.ID,
			Reason: fmt.Sprintf("waiting on %s for %v, at or above the %v delay budget", v.on, v.wait, p.budget),
			Details: []slog.Attr{
				slog.Duration("wait", v.wait),
				slog.Duration("lock_wait", v.lock),
				slog.Duration("queue_wait", v.queue),
				slog.Duration("budget", p.budget),
				slog.String("waiting_on", v.on),
			},
		})
	}
	return out
}

package baseline

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
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
// cancellable tasks that are waiting on a lock or a queue and whose
// accumulated lock and queue wait has reached the latency budget. See the
// package documentation.
//
// A Protego holds no state besides its configuration; Decide may be called
// from any goroutine, and concurrently.
type Protego struct {
	budget time.Duration
	cfg    protegoConfig
}

var _ policy.Policy = (*Protego)(nil)

// NewProtego returns the Protego-like victim-dropping policy: Decide
// proposes to cancel every cancellable, not yet cancelled task that is
// waiting now on a resource of kind [resource.KindLock] or
// [resource.KindQueue] and whose waits on such resources, the wait in
// progress included, add up to budget or more. NewProtego panics if budget
// is not positive, as time.NewTicker does for its period.
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

// Budget returns the latency budget.
func (p *Protego) Budget() time.Duration { return p.budget }

// Decide returns one [policy.Cancel] decision for each task to drop, in
// increasing order of task ID, or nil if there is none. Usage entries that
// refer to no resource of s are ignored. Decide does not modify s.
func (p *Protego) Decide(s *snapshot.Snapshot) []policy.Decision {
	type victim struct {
		i           int
		lock, queue time.Duration
		on          string // a resource waited on now
	}
	var victims []victim
	for i := range s.Tasks {
		t := &s.Tasks[i]
		if !t.Cancellable || t.Cancelled {
			continue
		}
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
			if u.Waiting > 0 && v.on == "" {
				v.on = r.Name
			}
		}
		if v.on == "" || v.lock+v.queue < p.budget {
			continue
		}
		victims = append(victims, v)
	}
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
		wait := v.lock + v.queue
		out = append(out, policy.Decision{
			Policy: p.Name(),
			Action: policy.Cancel,
			Task:   t.ID,
			Reason: fmt.Sprintf("waiting on %s after %v of lock and queue wait, at or above the %v budget",
				v.on, wait, p.budget),
			Details: []slog.Attr{
				slog.Duration("wait", wait),
				slog.Duration("lock_wait", v.lock),
				slog.Duration("queue_wait", v.queue),
				slog.Duration("budget", p.budget),
				slog.String("waiting_on", v.on),
			},
		})
	}
	return out
}

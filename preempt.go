package moirai

import (
	"context"
	"slices"
	"strings"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// orderOf is a policy's standing order (policy.Preemption) with the
// policy's name and the resource it names.
type orderOf struct {
	policy string
	res    *resource.Resource
	class  string
	reason string
}

// armPreemptsLocked sets, for the next acquisitions, the standing orders
// the policies gave at this step (policy.Preempter), and clears the ones
// given before that no policy gives now. Orders are set again only when
// they change, so that a step costs nothing while they stand.
func (c *Controller) armPreemptsLocked() {
	var next []orderOf
	for _, p := range c.cfg.policies {
		pr, ok := p.(policy.Preempter)
		if !ok {
			continue
		}
		orders := catch(c, userCode{"policy", p.Name(), "Preempt"}, nil, func() []policy.Preemption { return pr.Preempt(&c.snap, nil) })
		for _, o := range orders {
			if o.Resource < 0 || o.Resource >= len(c.snap.Resources) || o.Class == "" {
				continue
			}
			sr := &c.snap.Resources[o.Resource]
			if r := c.res.ByID(sr.ID); r != nil {
				next = append(next, orderOf{policy: p.Name(), res: r, class: o.Class, reason: o.Reason})
			}
		}
	}
	slices.SortStableFunc(next, func(a, b orderOf) int { return strings.Compare(a.res.Name(), b.res.Name()) })
	if slices.Equal(next, c.preempts) {
		return
	}
	c.disarmPreempts()
	c.preempts = next
	for i := 0; i < len(next); {
		r := next[i].res
		j := i
		for j < len(next) && next[j].res == r {
			j++
		}
		orders := next[i:j:j]
		classes := make([]string, len(orders))
		for k := range orders {
			classes[k] = orders[k].class
		}
		armPreempt(r, classes, func(t *task.Task, k int) bool { return c.preempt(t, orders[k]) })
		c.preArmed = append(c.preArmed, r)
		i = j
	}
}

// disarmPreempts clears every standing order set.
func (c *Controller) disarmPreempts() {
	for _, r := range c.preArmed {
		armPreempt(r, nil, nil)
	}
	c.preArmed = c.preArmed[:0]
	c.preempts = nil
}

// preempt carries out a standing order on t, about to take o.res, on t's
// goroutine: through the safety checks and the decision log, as the
// policy's own decisions at a step (actLocked). It reports whether t was
// cancelled. A task the checks refuse (refusalLocked: not cancellable,
// cancelled already, within the minimum interval after a cancellation)
// goes ahead unrecorded: an order stands for every task of its class,
// and a record of each refusal would flood the log.
func (c *Controller) preempt(t *task.Task, o orderOf) bool {
	d := policy.Decision{Policy: o.policy, Action: policy.Cancel, Task: t.ID(), Class: o.class, Resource: o.res.Name(), Reason: o.reason}
	c.mu.Lock()
	if c.refusalLocked(t, false, c.clock.Now()) != "" {
		c.mu.Unlock()
		return false
	}
	rec, ctx := c.actLocked(d, false, nil)
	if rec.Outcome == policy.Acted && len(c.preempted) < maxPreempted {
		c.preempted = append(c.preempted, t.ID())
	}
	c.mu.Unlock()
	c.publish([]policy.Record{rec}, []context.Context{ctx})
	return rec.Outcome == policy.Acted
}

// maxPreempted bounds the tasks cancelled on standing orders between two
// steps that the policies are told of (the minimum interval between two
// cancellations keeps it far below).
const maxPreempted = 1024

// notePreemptedLocked tells the policies that give standing orders which
// tasks were cancelled on them since the last step, before they observe
// the step's snapshot (policy.Preempter).
func (c *Controller) notePreemptedLocked() {
	if len(c.preempted) == 0 {
		return
	}
	for _, p := range c.cfg.policies {
		if pr, ok := p.(policy.Preempter); ok {
			catch(c, userCode{"policy", p.Name(), "Preempted"}, struct{}{}, func() struct{} { pr.Preempted(c.preempted); return struct{}{} })
		}
	}
	c.preempted = c.preempted[:0]
}

package moirai

import (
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// spentLocked returns the resource-time task t has used so far, summed
// over its resources (see estimate.Spent): the work a cancellation of t
// throws away, recorded in the decision's Lost. It also keeps the units t
// holds now, for a re-execution's demand (see Retry), until t ends.
func (c *Controller) spentLocked(t *task.Task, now int64) float64 {
	var sum float64
	var used []usedRes
	taskx.EachUsage(t, now, func(u task.Usage) {
		if r := c.res.ByID(u.Resource); r != nil {
			sum += estimate.Spent(&u, r.Capacity())
		}
		used = append(used, usedRes{u.Resource, u.Held})
	})
	if c.reexec.held == nil {
		c.reexec.held = map[uint64][]usedRes{}
	}
	c.reexec.held[t.ID()] = used
	return sum
}

// heldAtCancelLocked returns and forgets what task id held when it was
// cancelled.
func (c *Controller) heldAtCancelLocked(id uint64) []usedRes {
	u := c.reexec.held[id]
	delete(c.reexec.held, id)
	return u
}

// pruneHeldLocked forgets the cancelled tasks that have ended.
func (c *Controller) pruneHeldLocked() {
	for id := range c.reexec.held {
		if c.tasks.Lookup(id) == nil {
			delete(c.reexec.held, id)
		}
	}
}

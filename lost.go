package moirai

import (
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/task"
)

// spentLocked returns the resource-time task t has used so far, summed
// over its resources (see estimate.Spent): the work a cancellation of t
// throws away, recorded in the decision's Lost.
func (c *Controller) spentLocked(t *task.Task, now int64) float64 {
	var sum float64
	t.EachUsage(now, func(u task.Usage) {
		if r := c.res.ByID(u.Resource); r != nil {
			sum += estimate.Spent(&u, r.Capacity())
		}
	})
	return sum
}

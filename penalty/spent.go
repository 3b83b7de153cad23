package penalty

import (
	"time"

	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// used is how long a task has held a resource and waited for it in all,
// and whether it held it or waited for it when last seen.
type used struct {
	res              task.ResourceID
	hold, wait       time.Duration
	holding, waiting bool
}

// spent is what the tasks of a class that ended spent on a resource, on
// a moving average: holding it, waiting for it, serving penalties; and
// the share of them that served a penalty.
type spent struct {
	hold, wait, served time.Duration
	penalized          float64
}

// sawUsed records what the task has done with a resource so far: held
// it and waited for it, in all, and whether it holds it or waits for it
// now.
func (r *record) sawUsed(u snapshot.Usage) {
	v := used{u.Resource, u.Hold, u.Wait, u.Held > 0, u.Waiting > 0}
	for i := range r.used {
		if r.used[i].res == u.Resource {
			r.used[i] = v
			return
		}
	}
	if len(r.used) < maxUsed {
		r.used = append(r.used, v)
	}
}

// maxUsed bounds the resources whose use the policy follows per task.
const maxUsed = 8

// ended folds what a task that has left the snapshots spent into its
// class's averages.
func (p *Policy) ended(r *record) {
	if r.class == "" {
		return
	}
	pen := 0.0
	if r.served > 0 {
		pen = 1
	}
	for _, u := range r.used {
		// The task went on holding or waiting after the last snapshot
		// saw it, for half a window on average.
		if u.holding {
			u.hold += p.window / 2
		}
		if u.waiting {
			u.wait += p.window / 2
		}
		k := holdKey{r.class, u.res}
		d, ok := p.done[k]
		switch {
		case ok:
			d.hold += (u.hold - d.hold) / doneSmoothing
			d.wait += (u.wait - d.wait) / doneSmoothing
			d.served += (r.served - d.served) / doneSmoothing
			d.penalized += (pen - d.penalized) / doneSmoothing
		case len(p.done) < maxHolds:
			d = spent{u.hold, u.wait, r.served, pen}
		default:
			continue
		}
		p.done[k] = d
	}
}

// doneSmoothing is the weight of the moving averages of what the tasks
// of a class spent: a task that ended counts for 1/doneSmoothing.
const doneSmoothing = 8

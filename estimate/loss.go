package estimate

import (
	"time"

	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Spent returns the resource-time a task's usage u of a resource of the
// given capacity has consumed so far, in seconds of the whole
// resource: its hold time times the share of the capacity it holds (all
// of a lock, or a resource without a capacity; the units held now over
// the capacity, or one unit when it holds none at the moment, for a
// queue or pool). It is the work a cancellation throws away on that
// resource. Memory counts the same way, its hold being the time it kept
// units resident. The result is 0 for anything not positive.
//
// The runtime keeps a task's hold time (while it holds at least one unit)
// and its units held now, not the integral of units over time; the share
// is therefore today's, which is exact for a task that took its units
// once and an estimate for one whose units vary.
func Spent(u *task.Usage, capacity int64) float64 {
	if u.Hold <= 0 {
		return 0
	}
	secs := float64(u.Hold) / float64(time.Second)
	if capacity <= 1 {
		return secs
	}
	held := max(u.Held, 1)
	if held >= capacity {
		return secs
	}
	return secs * float64(held) / float64(capacity)
}

// Loss returns the work lost by cancelling Tasks[ti] of s: the sum of
// [Spent] over its usage, in resource-seconds, and its age.
func Loss(s *snapshot.Snapshot, ti int) (float64, time.Duration) {
	t := &s.Tasks[ti]
	first, n := int(t.First), int(t.N)
	if first < 0 || n < 0 || first+n > len(s.Usage) {
		return 0, t.Age
	}
	var sum float64
	for ui := first; ui < first+n; ui++ {
		u := &s.Usage[ui]
		if u.Res < 0 || int(u.Res) >= len(s.Resources) {
			continue
		}
		r := &s.Resources[u.Res]
		sum += Spent(&u.Usage, r.Capacity)
	}
	return sum, t.Age
}

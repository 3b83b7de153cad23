package estimate

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// ExecTime returns T_exec: the execution time of every task in the
// snapshot's window, the completed tasks' plus each live task's capped at
// the window. For a snapshot without a window (the first of a loop, or one
// built by an external source from cumulative views) it is the cumulative
// execution time of the live tasks and the completed ones.
func ExecTime(s *snapshot.Snapshot) time.Duration {
	total := max(s.Completed.Exec, 0)
	for i := range s.Tasks {
		e := max(s.Tasks[i].Exec, 0)
		if s.Window > 0 {
			e = min(e, s.Window)
		}
		total += e
	}
	return total
}

// Delay returns D_r of resource r in the snapshot's window: see the package
// documentation for what it is per kind. Without a window the cumulative
// totals are used.
func Delay(s *snapshot.Snapshot, r *snapshot.Resource) time.Duration {
	wait, evictions, misses := r.WindowWait, r.WindowEvictions, r.WindowWaits
	if s.Window <= 0 {
		wait, evictions, misses = r.Wait, r.Evictions, r.Waits
	}
	wait = max(wait, 0)
	if r.Kind != resource.KindMemory {
		return wait
	}
	return time.Duration(float64(wait) * EvictionRatio(evictions, misses))
}

// EvictionRatio returns ΣE/ΣM, the evictions over the misses of a window,
// in [0, 1]: 1 when every miss had to evict something to make room (a
// full pool turning over), 0 when misses found free room (a pool warming
// up) or nothing was evicted. A pool that evicted without recorded misses
// has ratio 1.
func EvictionRatio(evicted, misses int64) float64 {
	if evicted <= 0 {
		return 0
	}
	if misses <= 0 {
		return 1
	}
	return min(float64(evicted)/float64(misses), 1)
}

// Contention returns C_r = D_r / T_exec for every resource of s, indexed as
// s.Resources, in dst's storage. Each level is in [0, 1].
func Contention(s *snapshot.Snapshot, dst []float64) []float64 {
	dst = dst[:0]
	exec := ExecTime(s)
	for i := range s.Resources {
		dst = append(dst, Level(Delay(s, &s.Resources[i]), exec))
	}
	return dst
}

// Level returns delay/exec clamped to [0, 1]; 0 when either is not a
// positive, finite quantity.
func Level(delay, exec time.Duration) float64 {
	if delay <= 0 || exec <= 0 {
		return 0
	}
	return Clamp01(float64(delay) / float64(exec))
}

// Clamp01 returns x clamped to [0, 1], and 0 for NaN.
func Clamp01(x float64) float64 {
	switch {
	case math.IsNaN(x) || x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	return x
}

package moirai

import (
	"runtime"
	"sync"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Building a snapshot reads every live task's accounting and writes one
// entry per task and resource: with 10,000 tasks on 8 resources, megabytes
// of memory traffic. The build therefore runs in two passes. The first
// counts each task's entries and lays out Snapshot.Usage exactly; the
// second fills tasks and entries in place, split across up to GOMAXPROCS
// workers when there are many tasks, each summing the resources' totals on
// its own. Tasks that end while being read, and entries for resources
// registered during the build, are dropped by a compaction that runs only
// when one occurred.

// tasksPerWorker is the least number of tasks worth a worker of their own.
const tasksPerWorker = 2048

// partial is one worker's sums over the resources, and whether it dropped
// anything.
type partial struct {
	res     []resSum
	scratch []task.Usage
	dropped bool
}

type resSum struct {
	wait, hold       time.Duration
	waits, evictions int64
	holders, waiters int
	held             int64
}

// buildTasks fills dst.Tasks and dst.Usage from ts, and adds the live
// tasks' usage to dst.Resources.
func (c *Controller) buildTasks(dst *snapshot.Snapshot, ts []*task.Task, now int64, advance bool) {
	n := len(dst.Resources)
	// Pass 1: layout.
	dst.Tasks = grow(dst.Tasks, len(ts))
	var total int32
	for i, t := range ts {
		k := int32(taskx.Claimed(t))
		dst.Tasks[i].First, dst.Tasks[i].N = total, k
		total += k
	}
	dst.Usage = grow(dst.Usage, int(total))

	// Pass 2: fill, in parallel when large.
	workers := min(runtime.GOMAXPROCS(0), max(1, len(ts)/tasksPerWorker))
	for len(c.parts) < workers {
		c.parts = append(c.parts, partial{})
	}
	parts := c.parts[:workers]
	for w := range parts {
		parts[w].res = grow(parts[w].res, n)
		clear(parts[w].res)
		parts[w].dropped = false
	}
	fill := func(w, lo, hi int) {
		c.fillTasks(dst, ts, lo, hi, now, advance, &parts[w])
	}
	if workers == 1 {
		fill(0, 0, len(ts))
	} else {
		var wg sync.WaitGroup
		per := (len(ts) + workers - 1) / workers
		for w := 1; w < workers; w++ {
			lo, hi := w*per, min((w+1)*per, len(ts))
			wg.Go(func() { fill(w, lo, hi) })
		}
		fill(0, 0, min(per, len(ts)))
		wg.Wait()
	}

	dropped := false
	for w := range parts {
		p := &parts[w]
		dropped = dropped || p.dropped
		for i := range n {
			s, r := &p.res[i], &dst.Resources[i]
			r.Wait += s.wait
			r.Hold += s.hold
			r.Waits += s.waits
			r.Evictions += s.evictions
			r.Holders += s.holders
			r.Waiters += s.waiters
			r.Held += s.held
		}
	}
	if dropped {
		compact(dst)
	}
	chargeChains(dst, &c.chain)
}

// fillTasks fills the entries of ts[lo:hi]. A task that ended while being
// read gets ID 0; an entry that could not be filled gets Res -1; both are
// left for compact.
func (c *Controller) fillTasks(dst *snapshot.Snapshot, ts []*task.Task, lo, hi int, now int64, advance bool, p *partial) {
	n := int32(len(dst.Resources))
	grace := c.cfg.unendedGrace
	for i := lo; i < hi; i++ {
		t := ts[i]
		st := &dst.Tasks[i]
		if advance {
			taskx.CheckUnended(c.tasks, t, now, grace)
		}
		region := dst.Usage[st.First : st.First+st.N]
		if cap(p.scratch) < len(region) {
			p.scratch = make([]task.Usage, len(region))
		}
		// Entries claimed after the layout wait for the next snapshot.
		k := taskx.ReadSlots(t, p.scratch[:len(region)], now)
		ti := int32(i)
		tag := taskx.HolderTag(t.ID())
		for j := range k {
			u := p.scratch[j]
			ri := int32(u.Resource) - 1
			if ri < 0 || ri >= n {
				ri = -1 // registered after the resources were copied
			} else if lh := &c.liveTab[ri]; lh.N > 0 {
				if held, ok := lh.Of(tag); ok {
					u.Held++
					u.Hold += held
				}
			}
			region[j] = snapshot.Usage{Usage: u, Task: ti, Res: ri}
		}
		sp := t.Spec()
		done, total := taskx.ProgressOf(t)
		first, cnt := st.First, st.N
		*st = snapshot.Task{
			ID: t.ID(), Key: sp.Key, Class: sp.Class, Path: sp.Path, Kind: sp.Kind,
			Priority: sp.Priority, Goal: sp.MaxDeferral, Objective: sp.Objective, Cancellable: sp.Cancellable,
			Cancelled: t.Cancelled(), Active: taskx.Active(t), Activities: taskx.Activities(t),
			Age: time.Duration(now - taskx.Started(t)), Exec: taskx.ExecTime(t, now),
			Done: done, Total: total,
			Penalty: taskx.Penalty(t), PenaltyServed: taskx.PenaltyServed(t), Penalties: taskx.Penalties(t),
			First: first, N: cnt,
		}
		if taskx.Ended(t) {
			// Ended while being read: its accounting block may already
			// serve another task.
			st.ID = 0
			p.dropped = true
			continue
		}
		for j := range region {
			u := &region[j]
			if j >= k {
				u.Res = -1
			}
			if u.Res < 0 {
				p.dropped = true
				continue
			}
			s := &p.res[u.Res]
			s.wait += u.Wait
			s.hold += u.Hold
			s.waits += u.Waits
			s.evictions += u.Evictions
			if u.Held > 0 {
				s.holders++
				s.held += u.Held
			}
			if u.Waiting > 0 {
				s.waiters++
			}
		}
	}
}

// compact removes dropped tasks and entries, keeping the order.
func compact(dst *snapshot.Snapshot) {
	var nt, nu int32
	for i := range dst.Tasks {
		st := dst.Tasks[i]
		if st.ID == 0 {
			continue
		}
		first := nu
		for _, u := range dst.Usage[st.First : st.First+st.N] {
			if u.Res < 0 {
				continue
			}
			u.Task = nt
			dst.Usage[nu] = u
			nu++
		}
		st.First, st.N = first, nu-first
		dst.Tasks[nt] = st
		nt++
	}
	dst.Tasks, dst.Usage = dst.Tasks[:nt], dst.Usage[:nu]
}

// grow returns s resized to n, reusing its storage when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// Snapshot returns a snapshot of the live tasks and the resources now. Its
// window is the time since the loop's last snapshot.
func (c *Controller) Snapshot() *snapshot.Snapshot {
	s := new(snapshot.Snapshot)
	c.SnapshotInto(s)
	return s
}

// SnapshotInto stores a snapshot in dst, reusing dst's storage: repeated
// snapshots into one value allocate nothing once it has grown.
func (c *Controller) SnapshotInto(dst *snapshot.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.scratchLive[:0]
	c.buildLocked(dst, &live, false)
	clear(live)
	c.scratchLive = live[:0]
}

// buildLocked fills dst from the registries. With advance, it also reports
// never-ended tasks and moves the window baseline to now.
func (c *Controller) buildLocked(dst *snapshot.Snapshot, live *[]*task.Task, advance bool) {
	now := c.clock.Now()
	dst.Reset()
	dst.At = time.Duration(now)
	dst.Time = c.clock.Time(now)
	dst.Precise = c.clock.IsPrecise()

	// Resources, with the totals of the tasks that have ended.
	n := c.res.Len()
	if cap(dst.Resources) < n {
		dst.Resources = make([]snapshot.Resource, n)
	}
	dst.Resources = dst.Resources[:n]
	c.liveTab = grow(c.liveTab, n)
	for i := range dst.Resources {
		r := c.res.ByID(task.ResourceID(i + 1))
		r.LiveHolds(now, &c.liveTab[i])
		e := r.EndedTotals()
		dst.Resources[i] = snapshot.Resource{
			ID: r.ID(), Name: r.Name(), Kind: r.Kind(), Capacity: r.Capacity(),
			Wait: e.Wait, Hold: e.Hold, Waits: e.Waits, Evictions: e.Evictions,
			InUse: r.Resident(), Queued: r.QueueLength(), Untracked: r.Untracked(),
		}
	}

	// Tasks and their usage.
	*live = taskx.AppendLive(c.tasks, (*live)[:0])
	c.buildTasks(dst, *live, now, advance)

	// Completions and window deltas against the baseline.
	c.tasks.TotalsInto(&c.totals)
	b := &c.base
	dst.Completed = snapshot.Completions{
		Begun: c.totals.Begun, Ended: c.totals.Ended, Failed: c.totals.Failed,
		Exec: c.totals.Exec, Latency: c.totals.Latency,
	}
	if b.valid {
		dst.Window = time.Duration(now - b.at)
		dst.Completed.Begun = sub(c.totals.Begun, b.totals.Begun)
		dst.Completed.Ended = sub(c.totals.Ended, b.totals.Ended)
		dst.Completed.Failed = sub(c.totals.Failed, b.totals.Failed)
		dst.Completed.Exec = max(c.totals.Exec-b.totals.Exec, 0)
		dst.Completed.Latency.Sub(&b.totals.Latency)
	}
	for i := range dst.Resources {
		r := &dst.Resources[i]
		if b.valid && i < len(b.res) {
			p := b.res[i]
			r.WindowWait = max(r.Wait-p.wait, 0)
			r.WindowHold = max(r.Hold-p.hold, 0)
			r.WindowWaits = max(r.Waits-p.waits, 0)
			r.WindowEvictions = max(r.Evictions-p.evictions, 0)
		} else {
			r.WindowWait, r.WindowHold, r.WindowWaits = r.Wait, r.Hold, r.Waits
			r.WindowEvictions = r.Evictions
		}
	}
	if advance {
		b.res = b.res[:0]
		for i := range dst.Resources {
			r := &dst.Resources[i]
			b.res = append(b.res, resCum{r.Wait, r.Hold, r.Waits, r.Evictions})
		}
		b.totals.Begun, b.totals.Ended, b.totals.Failed, b.totals.Exec = c.totals.Begun, c.totals.Ended, c.totals.Failed, c.totals.Exec
		b.totals.Latency = c.totals.Latency
		b.at = now
		b.valid = true
		clear(*live) // do not keep ended tasks reachable
	}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

package moirai

import (
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// A wait is charged to the root of its chain (DESIGN.md, rule 1 of blame).
// A task waiting for a lock or queue that one other task holds is blocked: what
// it holds, it holds on behalf of the task it waits for, so it is never a
// candidate, and its holds are added to the usage of the root of its chain
// (the first task up the chain that does not wait), so that the root's
// gain includes freeing them. The pass is linear in tasks and entries and
// costs nothing more when no blocked task holds anything.

// maxChain bounds how far a chain is followed. A chain that is longer, or
// that comes back on itself (a deadlock), has no root: its tasks are left
// unblocked, candidates as before, so that a deadlock can still be broken.
const maxChain = 32

// chainScratch is the storage the pass reuses from one snapshot to the
// next.
type chainScratch struct {
	holder []int32 // per resource: the one task holding it, -1 none, or shared
	waits  []int32 // per task: the resource it waits for behind another task, or -1
	root   []int32 // per task: the root of its chain; -1 none, -2 not yet known
	extra  []snapshot.Usage
	buf    []snapshot.Usage
}

// shared marks a resource held by more than one task: a wait for it is
// behind no one task in particular (a pool full of light requests is not
// the root of a scan that waits for a slot), so it blocks no one.
const shared = -3

// blocking reports whether waiting for a resource of kind k is waiting
// behind another task.
func blocking(k resource.Kind) bool { return k == resource.KindLock || k == resource.KindQueue }

// chargeChains marks the blocked tasks of s and charges their holds to the
// roots of their chains.
func chargeChains(s *snapshot.Snapshot, cs *chainScratch) {
	nr, nt := len(s.Resources), len(s.Tasks)
	cs.holder = grow(cs.holder, nr)
	for i := range cs.holder {
		cs.holder[i] = -1
	}
	any := false
	for i := range s.Usage {
		u := &s.Usage[i]
		if u.Res < 0 || int(u.Res) >= nr || u.Task < 0 || int(u.Task) >= nt || !blocking(s.Resources[u.Res].Kind) {
			continue
		}
		switch h := cs.holder[u.Res]; {
		case u.Held <= 0 || h == u.Task || h == shared:
		case h < 0:
			cs.holder[u.Res] = u.Task
		default:
			cs.holder[u.Res] = shared
		}
		any = any || u.Waiting > 0
	}
	if !any {
		return
	}
	cs.waits = grow(cs.waits, nt)
	for i := range cs.waits {
		cs.waits[i] = -1
	}
	for i := range s.Usage {
		u := &s.Usage[i]
		if u.Waiting <= 0 || u.Res < 0 || int(u.Res) >= nr || u.Task < 0 || int(u.Task) >= nt {
			continue
		}
		if h := cs.holder[u.Res]; h >= 0 && h != u.Task && cs.waits[u.Task] < 0 {
			cs.waits[u.Task] = u.Res
		}
	}
	cs.root = grow(cs.root, nt)
	for i := range cs.root {
		cs.root[i] = -2
	}
	cs.extra = cs.extra[:0]
	for ti := range nt {
		r := rootOf(int32(ti), cs)
		if r < 0 || r == int32(ti) {
			continue
		}
		s.Tasks[ti].Blocked = true
		for _, u := range s.UsageOf(ti) {
			if u.Held > 0 {
				u.Task, u.Waiting, u.Wait, u.Waits = r, 0, 0, 0
				cs.extra = append(cs.extra, u)
			}
		}
	}
	if len(cs.extra) > 0 {
		mergeExtra(s, cs)
	}
}

// rootOf returns the root of ti's chain (ti itself when it is not
// blocked), or -1 when the chain has none within maxChain.
func rootOf(ti int32, cs *chainScratch) int32 {
	if r := cs.root[ti]; r != -2 {
		return r
	}
	cur := ti
	r := int32(-1)
	for range maxChain {
		if known := cs.root[cur]; known != -2 {
			r = known
			break
		}
		w := cs.waits[cur]
		if w < 0 {
			r = cur
			break
		}
		cur = cs.holder[w]
		if cur == ti {
			break // a cycle: no root
		}
	}
	// Every task on the walk shares its root, except within a cycle or
	// past the bound, where each is walked again (at most maxChain steps).
	if r >= 0 {
		for cur := ti; cs.root[cur] == -2; {
			cs.root[cur] = r
			if w := cs.waits[cur]; w >= 0 {
				cur = cs.holder[w]
			}
		}
	} else {
		cs.root[ti] = -1
	}
	return r
}

// mergeExtra adds the entries of cs.extra (each naming its root task) to
// the roots' entries, keeping Usage grouped by task.
func mergeExtra(s *snapshot.Snapshot, cs *chainScratch) {
	nt := len(s.Tasks)
	// Count per root, then place: a counting sort of the extras by task.
	cnt := grow(cs.waits, nt+1) // waits is no longer needed
	clear(cnt)
	for _, u := range cs.extra {
		cnt[u.Task+1]++
	}
	for i := 1; i <= nt; i++ {
		cnt[i] += cnt[i-1]
	}
	total := len(s.Usage) + len(cs.extra)
	buf := grow(cs.buf, total)
	// cnt[t] is the first extra of task t in sorted order; sort in place
	// into the tail of buf, then interleave.
	sorted := buf[len(s.Usage):total]
	pos := grow(cs.root, nt) // root is no longer needed
	copy(pos, cnt[:nt])
	for _, u := range cs.extra {
		sorted[pos[u.Task]] = u
		pos[u.Task]++
	}
	tmp := append(cs.extra[:0], sorted...) // sorted is overwritten below
	var n int32
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		first := n
		n += int32(copy(buf[n:], s.Usage[t.First:t.First+t.N]))
		n += int32(copy(buf[n:], tmp[cnt[ti]:cnt[ti+1]]))
		t.First, t.N = first, n-first
	}
	// Copied back rather than swapped: s's storage stays its own.
	s.Usage = grow(s.Usage, int(n))
	copy(s.Usage, buf[:n])
	cs.buf, cs.extra, cs.waits, cs.root = buf, tmp, cnt, pos
}

package cancel

import (
	"cmp"
	"slices"

	"github.com/moirai-go/moirai/snapshot"
)

// choose ranks the candidates best first, marking the dominated ones
// (except for Greedy), sets ev.Skyline and ev.Total, and returns the
// candidates in report order (at least the first limit of them), the
// chosen first, with the least-loss choice among those that free enough of
// the main resource (MultiObjective; -1 when none does: the best score,
// first in order, is chosen).
func (a *Atropos) choose(s *snapshot.Snapshot, ev *Evaluation, limit int) (order []int32, best int32, leastLoss bool) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	ids := func(i int32) uint64 { return s.Tasks[cands[i].task].ID }
	rd := dims
	if a.variant == MultiObjective {
		rd++
	}
	order, sky := a.rank(cands, vals, rd, limit, a.variant != Greedy, ids)
	ev.Skyline = sky
	ev.Total = len(cands)

	// Background work goes first: while a background task is a
	// candidate, the choice is among the background candidates alone,
	// by the same rule.
	bg := slices.ContainsFunc(cands, func(c cand) bool { return c.background })
	eligible := func(c *cand) bool { return !bg || c.background }
	// The choice: among the candidates that free enough of the main
	// resource, the one losing least (a candidate dominated by one that
	// does not free enough may be it); when none does alone, the best
	// score, which is never dominated (among background candidates: the
	// best-ranked one).
	best = -1
	if a.variant == MultiObjective {
		for i := range cands {
			c := &cands[i]
			if !c.sufficient || !eligible(c) {
				continue
			}
			if best < 0 || c.loss < cands[best].loss ||
				(c.loss == cands[best].loss && better(cands, int32(i), best, ids) < 0) {
				best = int32(i)
			}
		}
	}
	leastLoss = best >= 0
	if best < 0 && bg {
		for i := range cands {
			if cands[i].background && (best < 0 || better(cands, int32(i), best, ids) < 0) {
				best = int32(i)
			}
		}
	}
	if best >= 0 {
		// The chosen first, then the others in order.
		k := slices.Index(order, best)
		if k < 0 {
			order = append(order, 0)
			k = len(order) - 1
		}
		copy(order[1:k+1], order[:k])
		order[0] = best
		a.order = order
	}
	return order, best, leastLoss
}

// topSize is how many of the best candidates the skyline's pre-filter
// compares every other candidate with.
const topSize = 32

// rank orders the candidates best first (by score, then total share, then
// task ID; a dominator has a score at least as high and a larger total, so
// it always ranks first) and, with skyline, marks the dominated ones. It
// returns at least the first limit candidates in order, and the number of
// non-dominated candidates (all of them without skyline).
//
// The skyline is a sort-first one (a candidate is compared with the
// non-dominated candidates ranked before it; transitivity makes that
// enough), behind a pre-filter: the topSize best candidates, found in one
// pass, are compared with every other one first. On the skewed data of a
// real snapshot (a few tasks hold much, most hold little) they dominate
// nearly every candidate, and only the survivors are sorted. A candidate
// the pre-filter removes is dominated, and so is anything it would have
// dominated, so the survivors' skyline is the skyline.
func (a *Atropos) rank(cands []cand, vals []float64, dims, limit int, skyline bool, id func(int32) uint64) ([]int32, int) {
	better := func(x, y int32) int { return better(cands, x, y, id) }
	order := a.order[:0]
	n := len(cands)
	if n <= 2*topSize || limit > topSize {
		for i := range n {
			order = append(order, int32(i))
		}
	} else {
		// The topSize best, by insertion into a sorted slice.
		top := a.top[:0]
		for i := range int32(n) {
			if len(top) == topSize && better(i, top[topSize-1]) >= 0 {
				continue
			}
			j, _ := slices.BinarySearchFunc(top, i, better)
			if len(top) < topSize {
				top = append(top, 0)
			}
			copy(top[j+1:], top[j:len(top)-1])
			top[j] = i
		}
		a.top = top
		inTop := a.inTop(n, top)
		for i := range int32(n) {
			if inTop[i] {
				order = append(order, i)
				continue
			}
			if skyline {
				v := vals[cands[i].off : int(cands[i].off)+dims]
				for _, t := range top {
					o := cands[t].off
					if cands[i].support&^cands[t].support == 0 && dominates(vals[o:int(o)+dims], v) {
						cands[i].dominated = true
						break
					}
				}
			}
			if skyline && !cands[i].dominated {
				order = append(order, i)
			}
		}
	}
	slices.SortFunc(order, better)
	a.order = order
	if !skyline {
		return order, n
	}
	sky := a.sky[:0]
	for _, i := range order {
		c := &cands[i]
		if c.dominated {
			continue
		}
		v := vals[c.off : int(c.off)+dims]
		for _, j := range sky {
			o := cands[j].off
			if c.support&^cands[j].support == 0 && dominates(vals[o:int(o)+dims], v) {
				c.dominated = true
				break
			}
		}
		if !c.dominated {
			sky = append(sky, i)
		}
	}
	a.sky = sky[:0]
	return order, len(sky)
}

// better orders candidates x and y best first: by score, then total
// share, then task ID.
func better(cands []cand, x, y int32, id func(int32) uint64) int {
	cx, cy := &cands[x], &cands[y]
	if c := cmp.Compare(cy.score, cx.score); c != 0 {
		return c
	}
	if c := cmp.Compare(cy.total, cx.total); c != 0 {
		return c
	}
	return cmp.Compare(id(x), id(y))
}

// The support test above (a candidate can only dominate one whose positive
// dimensions are among its own) is exact when dims ≤ 64; beyond, the bits
// of the dimensions past 64 are not set, and the test still never rejects a
// true dominator.

// inTop returns a reusable table of which of n candidates are in top.
func (a *Atropos) inTop(n int, top []int32) []bool {
	t := a.topSet[:0]
	for range n {
		t = append(t, false)
	}
	for _, i := range top {
		t[i] = true
	}
	a.topSet = t
	return t
}

// dominates reports whether a is at least b everywhere and more somewhere.
func dominates(a, b []float64) bool {
	more := false
	for i, x := range a {
		y := b[i]
		if x < y {
			return false
		}
		if x > y {
			more = true
		}
	}
	return more
}

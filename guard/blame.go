package guard

import (
	"slices"
	"sort"
)

// Chain is one chain of the wait-for graph as the last Build saw it: the
// sessions waiting, directly or queued behind other waiters, for Resource,
// and the root blocker their waits are charged to. A chain whose root the
// source could not name has Root 0 and Why says why.
type Chain struct {
	Root     int64   `json:"root"`
	Resource string  `json:"resource"`
	Waiters  []int64 `json:"waiters"`
	// Inferred: the source inferred the root (see Use.Inferred).
	Inferred bool   `json:"inferred,omitempty"`
	Why      string `json:"why,omitempty"`
}

// blame rewrites one poll's uses on the wait-for graph, so that the
// snapshot's holders of a contended resource are the roots of its waits:
//
//   - a session that waits is never a holder: its granted locks (the tuple
//     lock of PostgreSQL's first row waiter, the record lock a queued
//     InnoDB waiter is listed as holding) are held on behalf of the
//     session it waits for;
//   - a resource some session waits for is held by the root blockers of
//     its waits (Use.BlockedBy, resolved by the source), and by nobody
//     else when every wait names its roots; a root the poll shows holding
//     nothing there is added as its holder;
//   - a root that itself waits (a cycle the server is about to break) is
//     nobody's root.
//
// It returns the uses, the sessions that wait, the chains, and the
// sessions whose hold of a contended resource was inferred.
//
// long: one pass per rule of the contract above, in its order.
func blame(in []Use, known map[int64]*Session) (out []Use, waiting map[int64]bool, chains []Chain, inferred map[int64]bool) {
	waiting = map[int64]bool{}
	for _, u := range in {
		if u.Waiting && known[u.Session] != nil {
			waiting[u.Session] = true
		}
	}
	type key struct {
		root int64
		res  string
	}
	rootsOf := map[string][]int64{}
	unnamed := map[string]bool{} // a wait on it names no root
	chainOf := map[key]*Chain{}
	var order []key
	addChain := func(k key, waiter int64, inf bool, why string) {
		c := chainOf[k]
		if c == nil {
			c = &Chain{Root: k.root, Resource: k.res, Why: why}
			chainOf[k] = c
			order = append(order, k)
		}
		if !slices.Contains(c.Waiters, waiter) {
			c.Waiters = append(c.Waiters, waiter)
		}
		c.Inferred = c.Inferred || inf
	}
	inferred = map[int64]bool{}
	for _, u := range in {
		if !u.Waiting || known[u.Session] == nil {
			continue
		}
		named := false
		for _, r := range u.BlockedBy {
			if r == u.Session || waiting[r] || known[r] == nil {
				continue
			}
			named = true
			if !slices.Contains(rootsOf[u.Resource], r) {
				rootsOf[u.Resource] = append(rootsOf[u.Resource], r)
			}
			addChain(key{r, u.Resource}, u.Session, u.Inferred, "")
			if u.Inferred {
				inferred[r] = true
			}
		}
		if !named {
			unnamed[u.Resource] = true
			why := u.Why
			if why == "" {
				why = "the server does not show whom it waits for"
			}
			addChain(key{0, u.Resource}, u.Session, false, why)
		}
	}
	out = make([]Use, 0, len(in))
	holds := map[key]bool{}
	for _, u := range in {
		if u.Held {
			if waiting[u.Session] {
				continue
			}
			if roots, contended := rootsOf[u.Resource]; contended && !unnamed[u.Resource] && !slices.Contains(roots, u.Session) {
				continue
			}
			holds[key{u.Session, u.Resource}] = true
			if u.Inferred {
				inferred[u.Session] = true
			}
		}
		out = append(out, u)
	}
	names := make([]string, 0, len(rootsOf))
	for name := range rootsOf {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, r := range rootsOf[name] {
			if !holds[key{r, name}] {
				holds[key{r, name}] = true
				out = append(out, Use{Session: r, Resource: name, Mode: "blocks", Held: true, Inferred: inferred[r]})
			}
		}
	}
	for _, k := range order {
		c := chainOf[k]
		slices.Sort(c.Waiters)
		chains = append(chains, *c)
	}
	return out, waiting, chains, inferred
}

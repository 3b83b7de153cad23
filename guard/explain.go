package guard

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moirai-go/moirai/cancel"
)

// Edge is one "waits for" of the wait-for graph: Waiter waits for a lock
// on Resource that Holder holds (the root holder when the wait is soft).
type Edge struct {
	Waiter   int64  `json:"waiter"`
	Holder   int64  `json:"holder"`
	Resource string `json:"resource"`
	Mode     string `json:"mode,omitempty"`
	Soft     bool   `json:"soft,omitempty"`
	// Waited is how long the waiter has waited, when the server tells.
	Waited time.Duration `json:"waited_ns,omitempty"`
}

// Explanation is what `moirai guard explain` prints: who waits for whom
// and what the guard would do now.
type Explanation struct {
	At    time.Time `json:"at"`
	Edges []Edge    `json:"edges"`
	// Roots are the sessions others wait for that wait for nobody.
	Roots []int64 `json:"roots"`
	// Sessions describes every session in an edge.
	Sessions map[int64]SessionInfo `json:"sessions"`
	// Contention per resource, the candidates and the choice.
	Evaluation cancel.Evaluation `json:"evaluation"`
	// Chains are the chains of waits, each with its root and, when the
	// guard cannot act on that root, why (Blocked, Why): it then acts on
	// nobody in the chain.
	Chains []ChainInfo `json:"chains,omitempty"`
	// Would is the session the guard would cancel now (0: none) and why.
	Would       int64  `json:"would_cancel"`
	WouldReason string `json:"would_reason"`
}

// ChainInfo is one chain of waits in an explanation.
type ChainInfo struct {
	Chain
	Blocked string `json:"blocked,omitempty"` // a Blocked* code; "" when the root can be acted on
	Reason  string `json:"reason,omitempty"`  // why the root cannot be acted on
}

// SessionInfo is a session as an explanation shows it.
type SessionInfo struct {
	User        string        `json:"user"`
	Application string        `json:"application"`
	State       string        `json:"state"`
	Age         time.Duration `json:"age_ns"`
	Query       string        `json:"query"`
	Protected   string        `json:"protected,omitempty"`
}

// Explain builds the explanation of the guard's last poll (call Step
// first for a fresh one).
func (g *Guard) Explain() (x Explanation) {
	ev, obs := g.Evaluate()
	x = Explanation{Evaluation: ev, Sessions: map[int64]SessionInfo{}}
	if obs == nil {
		x.WouldReason = ev.Reason
		return escapeAll(x)
	}
	x.At = obs.At
	sessions := map[int64]*Session{}
	for i := range obs.Sessions {
		sessions[obs.Sessions[i].ID] = &obs.Sessions[i]
	}
	waiting := map[int64]bool{}
	for _, u := range obs.Uses {
		if !u.Waiting {
			continue
		}
		waiting[u.Session] = true
		var waited time.Duration
		if !u.Since.IsZero() {
			waited = max(obs.At.Sub(u.Since), 0)
		}
		for _, h := range u.BlockedBy {
			x.Edges = append(x.Edges, Edge{Waiter: u.Session, Holder: h, Resource: u.Resource, Mode: u.Mode, Soft: u.Soft, Waited: waited})
		}
	}
	for _, e := range x.Edges {
		if !waiting[e.Holder] && !slices.Contains(x.Roots, e.Holder) {
			x.Roots = append(x.Roots, e.Holder)
		}
		for _, id := range []int64{e.Waiter, e.Holder} {
			if s := sessions[id]; s != nil {
				x.Sessions[id] = g.info(obs, s)
			}
		}
	}
	slices.Sort(x.Roots)
	for _, c := range g.b.Chains() {
		ci := ChainInfo{Chain: c}
		if c.Root == 0 {
			ci.Blocked, ci.Reason = BlockedNoRoot, c.Why
		} else if s := sessions[c.Root]; s != nil {
			ci.Blocked, ci.Reason = g.blocker(s)
			x.Sessions[c.Root] = g.info(obs, s)
		}
		x.Chains = append(x.Chains, ci)
	}
	defer func() { x = escapeAll(x) }()
	x.WouldReason = ev.Reason
	if ev.Chosen >= 0 && ev.Chosen < len(ev.Candidates) {
		id := ev.Candidates[ev.Chosen].Task
		if t, s, ok := g.b.Target(id); ok {
			x.Would = t.Session
			x.Sessions[t.Session] = g.info(obs, s)
			x.WouldReason, _ = g.annotate(id, s, ev.Reason)
		}
	}
	return x
}

func (g *Guard) info(obs *Observation, s *Session) SessionInfo {
	_, why := g.opt.Protect.Protects(s)
	return SessionInfo{User: s.User, Application: s.Application, State: s.State,
		Age: clampSince(obs.At, startOf(s), maxFirst), Query: truncate(s.Query, 200), Protected: why}
}

// WriteText writes x for a terminal: the waits grouped by holder, then
// the resources' contention and the decision.
func (x *Explanation) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if x.At.IsZero() {
		p("no observation: %s\n", x.WouldReason)
		_, err := io.WriteString(w, b.String())
		return err
	}
	p("at %s\n\n", x.At.Format(time.RFC3339Nano))
	if len(x.Edges) == 0 {
		p("nobody waits for a lock\n")
	} else {
		p("wait-for graph (waiter -> holder):\n")
		holders := map[int64][]Edge{}
		var order []int64
		for _, e := range x.Edges {
			if _, ok := holders[e.Holder]; !ok {
				order = append(order, e.Holder)
			}
			holders[e.Holder] = append(holders[e.Holder], e)
		}
		for _, h := range order {
			root := ""
			if slices.Contains(x.Roots, h) {
				root = " [root]"
			}
			p("  session %d%s %s\n", h, root, x.describe(h))
			for _, e := range holders[h] {
				soft := ""
				if e.Soft {
					soft = " (soft: queued behind another waiter)"
				}
				p("    <- %d waits %s for %s %s%s\n", e.Waiter, e.Waited.Round(time.Millisecond), Escape(e.Resource), Escape(e.Mode), soft)
			}
		}
	}
	for _, c := range x.Chains {
		inf := ""
		if c.Inferred {
			inf = " (root inferred: the server shows no metadata lock view)"
		}
		if c.Blocked != "" {
			p("\nno action on %s (root %d, %d waiting)%s: %s\n", Escape(c.Resource), c.Root, len(c.Waiters), inf, Escape(c.Reason))
		} else if inf != "" {
			p("\nchain on %s: root %d%s\n", Escape(c.Resource), c.Root, inf)
		}
	}
	p("\ncontention:\n")
	any := false
	for _, l := range x.Evaluation.Levels {
		if l.Level <= 0 && l.Waiters == 0 {
			continue
		}
		any = true
		mark := ""
		if l.Contended {
			mark = "  CONTENDED"
		}
		p("  %-40s %-6s level %.3f waiters %d%s\n", Escape(l.Resource), l.Kind, l.Level, l.Waiters, mark)
	}
	if !any {
		p("  none\n")
	}
	if x.Would != 0 {
		p("\nwould cancel session %d %s\n  because %s\n", x.Would, x.describe(x.Would), Escape(x.WouldReason))
	} else {
		p("\nwould do nothing: %s\n", Escape(x.WouldReason))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (x *Explanation) describe(id int64) string {
	s, ok := x.Sessions[id]
	if !ok {
		return "(not in the poll)"
	}
	prot := ""
	if s.Protected != "" {
		prot = " PROTECTED: " + s.Protected
	}
	return fmt.Sprintf("%s@%s %s %s: %s%s", Escape(s.User), Escape(s.Application), Escape(s.State),
		s.Age.Round(time.Millisecond), Escape(s.Query), prot)
}

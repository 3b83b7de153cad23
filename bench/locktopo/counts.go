package locktopo

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Count is one (server, topology)'s tally.
type Count struct {
	Server, Topology string
	// Scenarios run (built and checked); Skipped, BuildFailed and
	// Disturbed (by another client of the server) are not among them.
	Scenarios, Skipped, BuildFailed, Disturbed int
	// Actionable scenarios, and those whose roots were all acted on in
	// time (RootActed) or later (RootLate).
	Actionable, RootActed, RootLate int
	// WrongActions in all, and the scenarios with at least one.
	WrongActions, WrongScenarios int
	// Doubles counts the sessions acted on more than once (see
	// Options.Replicas).
	Doubles int
	// MaxRootLatency is the slowest in-time root action, from the first
	// wait.
	MaxRootLatency time.Duration
	// SkipReason is the first skipped scenario's reason.
	SkipReason string
}

// Counts tallies results per (server, topology), in the order of
// Topologies, with a total row per server (Topology "all").
func Counts(rs []Result) []Count {
	idx := map[[2]string]*Count{}
	var order [][2]string
	get := func(server, topo string) *Count {
		k := [2]string{server, topo}
		if c, ok := idx[k]; ok {
			return c
		}
		c := &Count{Server: server, Topology: topo}
		idx[k] = c
		order = append(order, k)
		return c
	}
	for _, r := range rs {
		for _, c := range []*Count{get(r.Server, r.Topology), get(r.Server, "all")} {
			switch {
			case r.Skipped != "":
				c.Skipped++
				if c.SkipReason == "" {
					c.SkipReason = r.Skipped
				}
				continue
			case r.Disturbed != "":
				c.Disturbed++
				continue
			case r.BuildError != "":
				c.BuildFailed++
				continue
			}
			c.Scenarios++
			if r.Actionable {
				c.Actionable++
				if r.RootActed {
					c.RootActed++
					c.MaxRootLatency = max(c.MaxRootLatency, r.RootLatency)
				}
				if r.RootLate {
					c.RootLate++
				}
			}
			c.WrongActions += r.Wrong
			c.Doubles += r.Doubles
			if r.Wrong > 0 {
				c.WrongScenarios++
			}
		}
	}
	rank := func(server, topo string) int {
		if topo == "all" {
			return 100
		}
		if i := slices.Index(Topologies(server), topo); i >= 0 {
			return i
		}
		return 99
	}
	slices.SortFunc(order, func(a, b [2]string) int {
		if a[0] != b[0] {
			return cmpStr(a[0], b[0])
		}
		return rank(a[0], a[1]) - rank(b[0], b[1])
	})
	out := make([]Count, len(order))
	for i, k := range order {
		out[i] = *idx[k]
	}
	return out
}

// WriteTable writes the counts for a terminal.
func WriteTable(w io.Writer, cs []Count) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOPOLOGY\tSCENARIOS\tACTIONABLE\tROOT_ACTED\tLATE\tWRONG_ACTIONS\tWRONG_SCENARIOS\tDOUBLES\tMAX_ROOT_MS\tBUILD_FAILED\tDISTURBED\tSKIPPED")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Server, c.Topology, c.Scenarios, c.Actionable, c.RootActed, c.RootLate,
			c.WrongActions, c.WrongScenarios, c.Doubles, c.MaxRootLatency.Milliseconds(), c.BuildFailed, c.Disturbed, c.Skipped)
	}
	return tw.Flush()
}

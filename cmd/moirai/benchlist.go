package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/cpusuite"
	"github.com/moirai-go/moirai/bench/dagorsuite"
	"github.com/moirai-go/moirai/bench/dbsuite"
	"github.com/moirai-go/moirai/bench/etcdsuite"
	"github.com/moirai-go/moirai/bench/pathfencesuite"
	"github.com/moirai-go/moirai/bench/promsuite"
	"github.com/moirai-go/moirai/bench/treesuite"
)

func newBenchListCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List the suites, their cases and the controllers", Args: noArgs}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return printBenchList(cmd.OutOrStdout(), g, benchList())
	}
	return cmd
}

// listing is what bench list prints: every suite's cases and controllers.
type listing struct {
	Cases       []bench.About
	Controllers []map[string]string
}

// controller lists a controller of the suite, named in its description
// ("": the in-process suites, whose controllers are the harness's).
func (l *listing) controller(c bench.Named, suite string) {
	if suite != "" {
		c.Describe += " (suite " + suite + ")"
	}
	l.Controllers = append(l.Controllers, map[string]string{"name": c.Name, "describe": c.Describe})
}

// benchList lists the cases and the controllers of every suite: the
// in-process suites' from the harness's registry, then each other suite's
// own listing.
func benchList() listing {
	var l listing
	for _, s := range bench.Suites() {
		for _, c := range bench.Cases(s) {
			l.Cases = append(l.Cases, bench.About{Suite: c.Suite, Name: c.Name, Models: c.Models, Resource: c.Resource, Culprit: c.Culprit, Victims: c.Victims})
		}
	}
	for _, c := range bench.Controllers() {
		l.controller(bench.Named{Name: c.Name, Describe: c.Describe}, "")
	}
	for _, s := range []bench.Listing{cpusuite.List(), dagorsuite.List(), dbsuite.PostgresList(), dbsuite.MySQLList(),
		pathfencesuite.List(), etcdsuite.Spec.List(), promsuite.Spec.List(), treesuite.List()} {
		l.Cases = append(l.Cases, s.Cases...)
		for _, c := range s.Controllers {
			l.controller(c, s.Suite)
		}
	}
	return l
}

// printBenchList prints l to out as two tables, or as JSON (-o).
func printBenchList(out io.Writer, g *globalFlags, l listing) error {
	if g.Output == outputJSON {
		return json.NewEncoder(out).Encode(l)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tCASE\tMODELS\tRESOURCE\tCULPRIT")
	for _, c := range l.Cases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Suite, c.Name, c.Models, c.Resource, c.Culprit)
	}
	fmt.Fprintln(tw, "\nCONTROLLER\tDESCRIPTION")
	for _, c := range l.Controllers {
		fmt.Fprintf(tw, "%s\t%s\n", c["name"], c["describe"])
	}
	return tw.Flush()
}

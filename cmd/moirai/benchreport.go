package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/report"
)

func newBenchReportCommand(g *globalFlags) *cobra.Command {
	var (
		in       []string
		md, html string
		figures  string
		summary  string
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Regenerate docs/RESULTS.md (and optionally the HTML report) from results.json files",
		Long: `report writes the Markdown of docs/RESULTS.md, and optionally an HTML report,
from the results.json of one or more runs of moirai bench run --out DIR.
With several --in, the Markdown holds each one's machine, parameters and
suites in order (e.g. the inproc and the cpu suites, measured apart); the
HTML report is written from the first.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(in) == 0 {
				return usageErrorf("--in is required: the results.json of a `moirai bench run --out DIR`")
			}
			var mdOpts []report.MarkdownOption
			if summary != "" {
				b, err := os.ReadFile(summary)
				if err != nil {
					return fmt.Errorf("--summary: %w", err)
				}
				mdOpts = append(mdOpts, report.WithSummary(string(b)))
			}
			var all []*bench.Results
			for _, path := range in {
				res, err := report.Load(path)
				if err != nil {
					return err
				}
				all = append(all, res)
			}
			if figures != "" {
				if err := writeFigures(figures, all); err != nil {
					return err
				}
			}
			if md == "" && html == "" {
				if figures != "" {
					return nil
				}
				return report.MarkdownAll(cmd.OutOrStdout(), all, mdOpts...)
			}
			for _, t := range []struct {
				path  string
				write func(io.Writer) error
			}{
				{md, func(w io.Writer) error { return report.MarkdownAll(w, all, mdOpts...) }},
				{html, func(w io.Writer) error { return report.HTML(w, all[0]) }},
			} {
				if t.path == "" {
					continue
				}
				f, err := os.Create(t.path)
				if err != nil {
					return err
				}
				err = t.write(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return errors.Join(fmt.Errorf("writing %s", t.path), err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&in, "in", nil, "results.json to read; repeat (or separate with commas) for several")
	cmd.Flags().StringVar(&md, "md", "", "Markdown file to write (e.g. docs/RESULTS.md); standard output if neither --md nor --html")
	cmd.Flags().StringVar(&html, "html", "", "HTML report to write")
	cmd.Flags().StringVar(&summary, "summary", "", "Markdown file written after the title of the Markdown report (docs/bench/summary.md: the reading of the saved runs per mechanism)")
	cmd.Flags().StringVar(&figures, "figures", "", "directory to write the figures the Markdown links to (e.g. docs/bench: the pathfence suite's pathfence-CASE.svg)")
	return cmd
}

func newBenchTrimCommand() *cobra.Command {
	var in, out string
	cmd := &cobra.Command{
		Use:   "trim",
		Short: "Save what the reports read of a results.json (the files of docs/bench)",
		Long: `trim writes to --out what moirai bench report reads of the results.json of a
moirai bench run --out DIR (--in): every row, the number of runs, and the
runs a figure draws (the pathfence suite's per-path series), one row per
line. The other runs' time series and events, most of a results.json, are
left out: a new run regenerates them, and its report.html draws them.
--in and --out may name the same file.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in == "" || out == "" {
				return usageErrorf("--in and --out are required")
			}
			res, err := report.Load(in)
			if err != nil {
				return err
			}
			return report.SaveTrimmed(out, res)
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "results.json to read (written by moirai bench run --out DIR)")
	cmd.Flags().StringVar(&out, "out", "", "file to write (e.g. docs/bench/results.json)")
	return cmd
}

// writeFigures writes the SVG figures of every results' suites that the
// Markdown links to, into dir.
func writeFigures(dir string, all []*bench.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--figures %s: %w", dir, err)
	}
	for _, r := range all {
		for name, svg := range report.PathfenceFigures(r) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(svg+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

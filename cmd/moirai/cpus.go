package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/cpu"
)

// cpusFlags are the flags of `moirai cpus`.
type cpusFlags struct {
	interval   time.Duration
	pid        int
	overcommit float64
	root       string
}

// cpusReport is what `moirai cpus -o json` prints.
type cpusReport struct {
	Budget      cpu.Budget `json:"budget"`
	ClockTickHz int        `json:"clock_tick_hz,omitempty"`
	ClockTick   string     `json:"clock_tick_error,omitempty"`
	Share       *shareInfo `json:"share,omitempty"`
	ShareError  string     `json:"share_error,omitempty"`
}

// shareInfo is the share of the busy CPU time of a process over an
// interval.
type shareInfo struct {
	PID        int     `json:"pid"`
	Interval   string  `json:"interval"`
	BusyCPUs   float64 `json:"host_busy_cpus"`
	SelfCPUs   float64 `json:"process_cpus"`
	Neighbours float64 `json:"neighbours_cpus"`
	Share      float64 `json:"share"`
	Overcommit float64 `json:"overcommit"`
	Active     int     `json:"active"`
}

func newCPUsCommand(g *globalFlags) *cobra.Command {
	f := &cpusFlags{}
	cmd := &cobra.Command{
		Use:   "cpus",
		Short: "Print the CPU budget, how it was derived, and the current neighbour share",
		Long: `cpus prints the CPUs this process may use (the smallest of its affinity mask
and the quotas of its cgroup and every ancestor, v1 or v2), every source it
read to get there, and, measured over --interval, how much of the host's
busy CPU time a process (--pid, default this one) used and how many workers
a neighbour-aware pool (package cpu) would run for it now.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.interval < 10*time.Millisecond || f.interval > time.Minute {
				return usageErrorf("--interval %v: want 10ms to 1m", f.interval)
			}
			if !(f.overcommit > 0) || f.overcommit > 16 {
				return usageErrorf("--overcommit %v: want (0, 16]", f.overcommit)
			}
			if f.pid < 0 {
				return usageErrorf("--pid %d: want a process ID", f.pid)
			}
			rep := cpusReport{Budget: cpu.ReadBudget(os.DirFS(f.root))}
			if hz, err := cpu.ReadClockTick(f.root); err != nil {
				rep.ClockTick = err.Error()
			} else {
				rep.ClockTickHz = hz
				s, err := measureShare(cmd.Context(), f, hz, rep.Budget.CPUs)
				if err != nil {
					rep.ShareError = err.Error()
				}
				rep.Share = s
			}
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			if g.Output == outputJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printCPUs(cmd, rep)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.interval, "interval", time.Second, "interval the share is measured over")
	fl.IntVar(&f.pid, "pid", 0, "process whose share to measure (default this one)")
	fl.Float64Var(&f.overcommit, "overcommit", 1, "overcommit factor O of the active count shown")
	fl.StringVar(&f.root, "root", "/", "root of the file system to read /proc and /sys under")
	fl.MarkHidden("root")
	return cmd
}

// measureShare reads the process's and the host's CPU time twice,
// interval apart.
func measureShare(ctx context.Context, f *cpusFlags, hz int, cpus float64) (*shareInfo, error) {
	pidDir := "self"
	if f.pid > 0 {
		pidDir = strconv.Itoa(f.pid)
	}
	read := func() (self, busy uint64, err error) {
		data, err := os.ReadFile(filepath.Join(f.root, "proc", pidDir, "stat"))
		if err != nil {
			return 0, 0, err
		}
		if self, err = cpu.ParseSelfStat(data); err != nil {
			return 0, 0, err
		}
		if data, err = os.ReadFile(filepath.Join(f.root, "proc", "stat")); err != nil {
			return 0, 0, err
		}
		busy, err = cpu.ParseStat(data)
		return self, busy, err
	}
	s0, b0, err := read()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	t := time.NewTimer(f.interval)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	}
	s1, b1, err := read()
	if err != nil {
		return nil, err
	}
	el := time.Since(start).Seconds() * float64(hz) // ticks elapsed
	info := &shareInfo{PID: f.pid, Interval: f.interval.String(), Overcommit: f.overcommit}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	ds, db := float64(s1-s0), float64(b1-b0)
	if s1 < s0 || b1 < b0 {
		return info, fmt.Errorf("a counter went backwards")
	}
	info.BusyCPUs = db / el
	info.SelfCPUs = ds / el
	info.Neighbours = max(info.BusyCPUs-info.SelfCPUs, 0)
	info.Share = 1
	if db > 0 {
		info.Share = min(ds/db, 1)
	}
	info.Active = cpu.Active(f.overcommit, info.Share, cpus, cpu.Limit(f.overcommit, cpus))
	return info, nil
}

func printCPUs(cmd *cobra.Command, rep cpusReport) error {
	out := cmd.OutOrStdout()
	b := rep.Budget
	fmt.Fprintf(out, "budget      %s\n", b)
	if rep.ClockTickHz > 0 {
		fmt.Fprintf(out, "clock tick  %d Hz (%v), AT_CLKTCK of /proc/self/auxv\n", rep.ClockTickHz, time.Second/time.Duration(rep.ClockTickHz))
	} else {
		fmt.Fprintf(out, "clock tick  unknown: %s\n", rep.ClockTick)
	}
	fmt.Fprintln(out, "\nderivation")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tFILE\tVALUE\tALLOWS\tNOTE")
	for _, s := range b.Steps {
		allows := "-"
		if s.CPUs > 0 {
			allows = cpu.FormatCPUs(s.CPUs)
		}
		note := s.Note
		if s.Err != "" {
			note = s.Err + "; " + s.Note
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Source, dash(s.File), dash(s.Value), allows, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s := rep.Share; s != nil && rep.ShareError == "" {
		fmt.Fprintf(out, "\nshare over %s (pid %d)\n", s.Interval, s.PID)
		fmt.Fprintf(out, "host busy   %.2f CPUs\n", s.BusyCPUs)
		fmt.Fprintf(out, "process     %.2f CPUs (share %.1f%% of the busy time)\n", s.SelfCPUs, 100*s.Share)
		fmt.Fprintf(out, "neighbours  %.2f CPUs\n", s.Neighbours)
		fmt.Fprintf(out, "active      %d workers = ⌈%s · %.3f · %s⌉, at least 1\n", s.Active,
			cpu.FormatCPUs(s.Overcommit), s.Share, cpu.FormatCPUs(b.CPUs))
	} else if rep.ShareError != "" {
		fmt.Fprintf(out, "\nshare unknown: %s\n", rep.ShareError)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

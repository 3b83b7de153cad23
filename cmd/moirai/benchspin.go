package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
)

// spinCommand is the hidden subcommand --host-load runs in each of its
// busy-looping processes.
const spinCommand = "spin"

// newBenchSpinCommand returns the hidden subcommand that keeps one CPU
// busy until its standard input is closed (its parent closes it after the
// run, or dies): a neighbour taking the host's CPU from the service.
func newBenchSpinCommand() *cobra.Command {
	return &cobra.Command{
		Use:    spinCommand,
		Short:  "Keep one CPU busy until standard input closes (used by bench run --host-load)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var done atomic.Bool
			go func() {
				_, _ = io.Copy(io.Discard, cmd.InOrStdin())
				done.Store(true)
			}()
			x := uint64(1)
			for !done.Load() {
				for range 1 << 16 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
			}
			if x == 0 { // never: keeps the loop from being optimized away
				fmt.Fprintln(cmd.ErrOrStderr(), x)
			}
			return nil
		},
	}
}

// hostLoadCommand returns the command of one --host-load process: this
// program, re-executed with the hidden spin subcommand.
func hostLoadCommand() (func(ctx context.Context) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run the host load: %w", err)
	}
	return func(ctx context.Context) *exec.Cmd {
		c := exec.CommandContext(ctx, exe, "bench", spinCommand)
		c.WaitDelay = 5 * time.Second
		return c
	}, nil
}

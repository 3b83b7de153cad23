package main

import (
	"io"
	"testing"

	"github.com/spf13/cobra"
)

// Observation 8: acting is explicit; without --act the guard runs dry.
func TestGuardIsDryRunWithoutAct(t *testing.T) {
	f := &guardFlags{}
	cmd := &cobra.Command{}
	f.register(cmd, true)
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	o, err := f.options(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.DryRun {
		t.Fatal("without --act the guard acts; it must run as --dry-run")
	}
}

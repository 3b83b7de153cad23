package main

import (
	"io"
	"strings"
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

func TestGuardActAndDryRunConflict(t *testing.T) {
	_, _, err := run(t, "guard", "--dsn", "postgres://x@127.0.0.1:1/db", "--act", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "--act and --dry-run") || exitCode(err) != ExitBadArgs {
		t.Fatalf("error %v, want a usage error naming --act and --dry-run", err)
	}
}

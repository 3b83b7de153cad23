package bench

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// The host load starts its processes, each with its standard input a
// pipe that keeps it running, and stop ends them all; bad counts are
// refused.
func TestHostLoad(t *testing.T) {
	if _, err := exec.LookPath("cat"); err != nil {
		t.Skip("no cat to run as a host-load process")
	}
	o := Options{HostLoad: 3, HostLoadCommand: func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, "cat") }}
	if err := o.checkHostLoad(); err != nil {
		t.Fatal(err)
	}
	var started []*exec.Cmd
	cmd := o.HostLoadCommand
	o.HostLoadCommand = func(ctx context.Context) *exec.Cmd { c := cmd(ctx); started = append(started, c); return c }
	stop, err := startHostLoad(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(started) != 3 {
		t.Fatalf("started %d processes, want 3", len(started))
	}
	for _, c := range started {
		if c.Process == nil || c.ProcessState != nil {
			t.Fatalf("process %v not running", c)
		}
	}
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not end the host load")
	}
	for _, c := range started {
		if c.ProcessState == nil {
			t.Fatalf("process %v not waited for", c)
		}
	}
	for _, bad := range []Options{{HostLoad: -1}, {HostLoad: MaxHostLoad + 1, HostLoadCommand: o.HostLoadCommand}, {HostLoad: 1}} {
		if err := bad.checkHostLoad(); err == nil {
			t.Errorf("host load %d (command %v) accepted", bad.HostLoad, bad.HostLoadCommand != nil)
		}
	}
}

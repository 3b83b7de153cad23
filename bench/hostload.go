package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// MaxHostLoad bounds Options.HostLoad: a few times the cores of any
// machine the harness runs on is a hostile host; more only slows the
// invocation down.
const MaxHostLoad = 64

// startHostLoad starts o.HostLoad busy-looping processes from
// o.HostLoadCommand, each with its standard input a pipe from this
// process (closed when this process exits, so a child outlives no run
// even if the harness is killed), and returns the function that stops
// them: it closes their pipes, kills them and waits for them.
func startHostLoad(ctx context.Context, o Options) (stop func(), err error) {
	var cmds []*exec.Cmd
	var pipes []io.Closer
	stop = func() {
		for _, p := range pipes {
			p.Close()
		}
		for _, c := range cmds {
			if c.Process != nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	}
	for range o.HostLoad {
		c := o.HostLoadCommand(ctx)
		in, err := c.StdinPipe()
		if err != nil {
			stop()
			return nil, fmt.Errorf("bench: host load: %w", err)
		}
		if err := c.Start(); err != nil {
			in.Close()
			stop()
			return nil, fmt.Errorf("bench: host load: %w", err)
		}
		cmds, pipes = append(cmds, c), append(pipes, in)
	}
	return stop, nil
}

// checkHostLoad rejects a host load out of bounds or with no command.
func (o Options) checkHostLoad() error {
	switch {
	case o.HostLoad < 0 || o.HostLoad > MaxHostLoad:
		return fmt.Errorf("bench: host load %d: want 0 to %d processes", o.HostLoad, MaxHostLoad)
	case o.HostLoad > 0 && o.HostLoadCommand == nil:
		return errors.New("bench: host load without a command to start")
	}
	return nil
}

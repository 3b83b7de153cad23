package dbsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// execute runs a suite once its table is set up: one unmeasured settling
// run first (the run right after the set-up is slower by about 5 %, the
// pages the set-up dirtied still being flushed, which would flatter the
// first case's controllers), then the matrix of the cases and
// controllers (see matrix). params describe the runs in the results.
func (o *Options) execute(suite string, params map[string]string, cases []string, ctls []Controller, run func(i int, ctl *Controller) (*measure, error), after func() error) (*bench.Results, error) {
	res := &bench.Results{Suite: suite, Started: time.Now().UTC(), Duration: o.Duration.String(),
		Machine: bench.CurrentMachine(), Params: params}
	o.describeRounds(res.Params)
	o.Progress(0, 1, "settling")
	if _, err := run(0, nil); err != nil {
		return nil, fmt.Errorf("settling run: %w", err)
	}
	res.Params["warm-up"] += "; one unmeasured run after the table's set-up"
	return res, o.matrix(res, cases, ctls, run, after)
}

// loop describes the victims' load: a closed loop, or an open one at the
// rate, which the client takes through its option flag.
func (o *Options) loop(flag string) string {
	if o.Rate > 0 {
		return fmt.Sprintf("open loop at %g transactions/s (%s)", o.Rate, flag)
	}
	return "closed loop"
}

// beside is what runs beside the victims' client in one run: the
// culprit, from the warm-up's end, and the controller.
type beside struct {
	wg                   sync.WaitGroup
	culpritErr, startErr error
	stop                 func() (culprits, victims int, err error)
	// What the controller counted of its cancels, once stopped.
	culprits, victims int
	stopErr           error
}

// startBeside starts the culprit (nil: none) once warm has passed, unless
// ctx ends first, and the controller through start (nil: none), which
// returns the function that stops it and counts its cancels on the
// culprit's sessions and on others.
func startBeside(ctx context.Context, warm time.Duration, culprit func(context.Context) error, start func() (func() (int, int, error), error)) *beside {
	b := &beside{stop: func() (int, int, error) { return 0, 0, nil }}
	if culprit != nil {
		b.wg.Go(func() {
			select {
			case <-time.After(warm):
			case <-ctx.Done():
				return
			}
			b.culpritErr = culprit(ctx)
		})
	}
	if start != nil {
		stop, err := start()
		if stop != nil {
			b.stop = stop
		}
		b.startErr = err
	}
	return b
}

// stopController stops the controller and keeps its counts.
func (b *beside) stopController() {
	b.culprits, b.victims, b.stopErr = b.stop()
}

// account sets m's cancels and error once the culprit and the controller
// are over: culpritCancels are the cancels the culprit's own sessions saw;
// under the timeouts, timeouts are the victims' statements they ended;
// under the guard and pt-kill, their own counts decide.
func (b *beside) account(m *measure, ctl string, culpritCancels, timeouts int) {
	m.culpritCancels = culpritCancels
	switch ctl {
	case "timeout":
		m.victimCancels = timeouts
	case "guard", "ptkill":
		m.culpritCancels, m.victimCancels = b.culprits, b.victims
	}
	m.cancels = m.culpritCancels + m.victimCancels
	if err := errors.Join(b.culpritErr, b.startErr, b.stopErr); err != nil {
		m.err = err.Error()
	}
}

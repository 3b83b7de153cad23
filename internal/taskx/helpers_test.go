package taskx_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// env is a clock and a registry reading it. Inside a synctest bubble it
// must be made inside the bubble, so that the clock's epoch and the
// registry's timers are the bubble's fake time.
type env struct {
	clk     *clock.Clock
	reg     *task.Registry
	reports *reports
}

// newEnv returns an env whose registry hands the errors it recovers from to
// env.reports. o.Report, if set, is replaced.
func newEnv(t *testing.T, o task.Options) *env {
	t.Helper()
	rep := &reports{}
	o.Report = rep.add
	clk := clock.New()
	return &env{clk: clk, reg: taskx.NewRegistry(clk, o), reports: rep}
}

// begin starts a task that the test ends on cleanup (ending it twice is
// harmless, but it is counted: tests of EndedTwice use e.reg.Begin).
func (e *env) begin(t *testing.T, spec task.Spec) (context.Context, *task.Task) {
	t.Helper()
	ctx, tk := e.reg.Begin(context.Background(), spec)
	t.Cleanup(func() {
		if !taskx.Ended(tk) {
			tk.End(nil)
		}
	})
	return ctx, tk
}

// sleep lets fake time pass (inside a bubble) and advances the coarse
// clock, which the accounting reads, to the new time.
func (e *env) sleep(d time.Duration) {
	time.Sleep(d)
	e.clk.Advance()
}

// reports collects the errors a registry reports, from any goroutine.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *reports) get() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// usage returns tk's accounting for resource id, failing the test if the
// task never touched it.
func usage(t *testing.T, tk *task.Task, id task.ResourceID) task.Usage {
	t.Helper()
	u, ok := taskx.UsageOf(tk, id)
	if !ok {
		t.Fatalf("Usage(%d): not found", id)
	}
	return u
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

package dbsuite

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestBeside: the culprit starts when the warm-up ends, not before; a run
// that ends first never starts it; the controller's counts replace the
// culprit's own under the guard and pt-kill, the timeouts' count is the
// victims' under the timeouts, and every error is kept.
func TestBeside(t *testing.T) {
	errCulprit, errStart, errStop := errors.New("culprit"), errors.New("start"), errors.New("stop")
	tests := []struct {
		name        string
		ctl         string
		runFor      time.Duration // when the run's context ends
		startErr    error
		wantStarted bool
		want        measure
	}{
		{name: "no control", ctl: "none", runFor: 10 * time.Second, wantStarted: true,
			want: measure{culpritCancels: 1, cancels: 1, err: "culprit"}},
		{name: "timeouts", ctl: "timeout", runFor: 10 * time.Second, wantStarted: true,
			want: measure{culpritCancels: 1, victimCancels: 7, cancels: 8, err: "culprit"}},
		{name: "guard", ctl: "guard", runFor: 10 * time.Second, wantStarted: true,
			want: measure{culpritCancels: 2, victimCancels: 3, cancels: 5, err: "culprit\nstop"}},
		{name: "guard failed to start", ctl: "guard", runFor: 10 * time.Second, startErr: errStart, wantStarted: true,
			want: measure{culpritCancels: 2, victimCancels: 3, cancels: 5, err: "culprit\nstart\nstop"}},
		{name: "run over before the warm-up", ctl: "ptkill", runFor: time.Second,
			want: measure{culpritCancels: 2, victimCancels: 3, cancels: 5, err: "stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), tt.runFor)
				defer cancel()
				start := time.Now()
				var startedAt time.Duration
				started := false
				b := startBeside(ctx, 3*time.Second, func(context.Context) error {
					started, startedAt = true, time.Since(start)
					return errCulprit
				}, func() (func() (int, int, error), error) {
					if tt.ctl == "none" || tt.ctl == "timeout" {
						return nil, nil
					}
					return func() (int, int, error) { return 2, 3, errStop }, tt.startErr
				})
				<-ctx.Done()
				b.stopController()
				b.wg.Wait()
				if started != tt.wantStarted || (started && startedAt != 3*time.Second) {
					t.Errorf("culprit started %v at %v, want %v at 3s", started, startedAt, tt.wantStarted)
				}
				var m measure
				b.account(&m, tt.ctl, 1, 7)
				got := [4]any{m.culpritCancels, m.victimCancels, m.cancels, m.err}
				want := [4]any{tt.want.culpritCancels, tt.want.victimCancels, tt.want.cancels, tt.want.err}
				if got != want {
					t.Errorf("account = %v (culprits, victims, all, error), want %v", got, want)
				}
			})
		})
	}
}

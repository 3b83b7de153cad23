package moirai_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/task"
)

// A steady stream of requests of one route, each lasting lat, under the
// controller's default objective of 50 ms: the detector fires exactly when
// the route's own objective (or the default) is missed, and never for a
// route of no objective or background work.
func TestRouteObjectives(t *testing.T) {
	for _, tc := range []struct {
		name      string
		objective time.Duration
		kind      task.Kind
		lat       time.Duration
		fire      bool
	}{
		{"default objective met", 0, moirai.Request, 20 * time.Millisecond, false},
		{"default objective missed", 0, moirai.Request, 200 * time.Millisecond, true},
		{"own loose objective met", 500 * time.Millisecond, moirai.Request, 200 * time.Millisecond, false},
		{"own tight objective missed", 10 * time.Millisecond, moirai.Request, 30 * time.Millisecond, true},
		{"no objective", moirai.NoObjective, moirai.Request, 200 * time.Millisecond, false},
		{"background", 0, moirai.Background, 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
				defer ctl.Close()
				fired := false
				for range 300 { // 3 s, a request every 10 ms
					go func() {
						_, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "route", Kind: tc.kind, Objective: tc.objective})
						time.Sleep(tc.lat)
						tk.End(nil)
					}()
					time.Sleep(10 * time.Millisecond)
					fired = fired || len(ctl.Firing()) > 0
				}
				if fired != tc.fire {
					t.Errorf("fired %v; want %v", fired, tc.fire)
				}
				time.Sleep(time.Second)
			})
		})
	}
}

package inproc_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
	_ "github.com/moirai-go/moirai/bench/inproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCasesBuild builds every case of the suite on a fresh controller and
// checks the service is complete: the measured runs are `moirai bench`'s.
func TestCasesBuild(t *testing.T) {
	cases := bench.Cases("inproc")
	if len(cases) != 15 {
		t.Errorf("%d inproc cases, want the 11 of CASES.md, the 3 of two heavy holders and a monolithic writer, and harmless-heavy", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Models == "" || c.Resource == "" || c.Culprit == "" || c.Victims == "" {
				t.Errorf("case description incomplete: %+v", c)
			}
			ctl := moirai.New()
			defer ctl.Close()
			svc, err := c.Build(&bench.Env{Ctl: ctl, Seed: 1, Duration: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if svc.Close != nil {
				defer svc.Close()
			}
			if svc.Light == nil || svc.Culprit == nil || svc.Rate <= 0 {
				t.Errorf("service incomplete: rate %v", svc.Rate)
			}
		})
	}
}

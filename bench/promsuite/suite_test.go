package promsuite

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench/serversuite"
	"github.com/moirai-go/moirai/bench/serversuite/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelect(t *testing.T) {
	cs, ctls, err := Spec.Select("all", "none,moirai")
	if err != nil || len(cs) != 1 || len(ctls) != 2 || ctls[1].Name != "moirai" || !ctls[1].Patched {
		t.Fatalf("Select: %v %v %v", cs, ctls, err)
	}
	if _, _, err := Spec.Select("dashboard,nope", "all"); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("unknown case: %v, want the names listed", err)
	}
	if _, _, err := Spec.Select("all", "pbox"); err == nil || !strings.Contains(err.Error(), "none, moirai, timeout, max-samples, concurrency") {
		t.Errorf("unknown controller: %v, want the names listed", err)
	}
}

// TestExecute runs the suite on a fake integration module: promload gets
// the case's parallel queries and the series, the engine's timeout that
// fails victims is measured (its drop rate), not a failed row, and the
// results name Prometheus's module and the patch's size.
func TestExecute(t *testing.T) {
	dir := servertest.Integration(t, Spec, map[string]servertest.Run{
		"normal": {Factor: 1}, "none": {Factor: 10}, "moirai": {Factor: 1.5}, "timeout": {Factor: 8, Failed: 10},
		"max-samples": {Factor: 2}, "concurrency": {Factor: 3},
	})
	cs, ctls, err := Spec.Select("dashboard", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Spec.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if want := map[bool]float64{true: 10.0 / 110, false: 0}[r.Controller == "timeout"]; r.Error != "" || math.Abs(r.DropRate-want) > 1e-9 {
			t.Errorf("%s: drop rate %v (%q), want %v (failed victims are measured, not a failed row)", r.Controller, r.DropRate, r.Error, want)
		}
	}
	if got := res.Params["victims failed: dashboard/timeout"]; got != "10 of 110; first: deadline" {
		t.Errorf("timeout's failed victims: %q", got)
	}
	if got := res.Params["prometheus"]; !strings.HasPrefix(got, "github.com/prometheus/prometheus ") || res.Params["series"] == "" {
		t.Errorf("params %v: want Prometheus's module and the series", res.Params)
	}
	b, err := os.ReadFile(servertest.Args(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "-parallel 2 -series 5000 -warmup 1s -duration 6s ") {
		t.Errorf("promload ran with %q", b)
	}
}

package serversuite_test

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench/etcdsuite"
	"github.com/moirai-go/moirai/bench/promsuite"
	"github.com/moirai-go/moirai/bench/serversuite"
	"github.com/moirai-go/moirai/bench/serversuite/servertest"
)

// TestSuites runs each suite of a patched server on a fake integration
// module: its names, the flags its load program gets (the case's culprit
// and the data's size), what a remedy that fails victims does to its row
// (counted in its drop rate; etcd's row fails too, prometheus's does not:
// the engine's timeout is a remedy), and the results naming its module
// and its data.
func TestSuites(t *testing.T) {
	for _, c := range []struct {
		s           *serversuite.Suite
		kase        string
		controllers string // every controller, as an unknown one lists them
		args        string // the first load program's flags
		sizeParam   string
		measured    bool // failed victims are measured, not a failed row
	}{
		{etcdsuite.Spec, "full-range", "none, moirai, oracle, timeout, ratelimit, paginate",
			"-culprit full -keys 600000 -warmup 1s -duration 4s ", "keys", false},
		{promsuite.Spec, "dashboard", "none, moirai, oracle, timeout, max-samples, concurrency",
			"-parallel 2 -series 5000 -warmup 1s -duration 6s ", "series", true},
	} {
		t.Run(c.s.Name, func(t *testing.T) {
			if _, _, err := c.s.Select("all", "pbox"); err == nil || !strings.Contains(err.Error(), c.controllers) {
				t.Errorf("unknown controller: %v, want %s listed", err, c.controllers)
			}
			runs := map[string]servertest.Run{"normal": {Factor: 1}, "moirai": {Factor: 1.5}, "timeout": {Factor: 8, Failed: 10}}
			for _, ctl := range c.s.Controllers {
				if _, ok := runs[ctl.Name]; !ok {
					runs[ctl.Name] = servertest.Run{Factor: 2}
				}
			}
			dir := servertest.Integration(t, c.s, runs)
			cs, ctls, err := c.s.Select(c.kase, "all")
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Rows {
				failed := r.Controller == "timeout"
				wantErr, wantDrop := failed && !c.measured, 0.0
				if failed {
					wantDrop = 10.0 / 110
				}
				if (r.Error == "a victim failed: deadline") != wantErr || !wantErr && r.Error != "" || math.Abs(r.DropRate-wantDrop) > 1e-9 {
					t.Errorf("%s: error %q, drop rate %v; want failed %v, drop rate %v", r.Controller, r.Error, r.DropRate, wantErr, wantDrop)
				}
			}
			if got := res.Params[c.s.Module]; !strings.HasPrefix(got, c.s.ServerModule+" v1.2.3; patch: 1 lines added") || res.Params[c.sizeParam] == "" {
				t.Errorf("params %v: want the server's module and the %s", res.Params, c.sizeParam)
			}
			b, err := os.ReadFile(servertest.Args(dir))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), c.args) {
				t.Errorf("the load program ran with %q, want %q first", b, c.args)
			}
		})
	}
}

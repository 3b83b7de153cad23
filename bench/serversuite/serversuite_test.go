package serversuite_test

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench/serversuite"
	"github.com/moirai-go/moirai/bench/serversuite/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// suite is a suite of a made-up server, with a limiter among its remedies.
func suite(failuresMeasured bool) *serversuite.Suite {
	return &serversuite.Suite{
		Name: "kv", Server: "KV", ServerModule: "example.com/kv", Module: "kv", Build: "./cmd/kvbuild",
		Cases: []serversuite.Case{
			{Name: "scan", Args: []string{"-culprit", "scan"}},
			{Name: "dump", Args: []string{"-culprit", "dump"}},
		},
		Controllers: []serversuite.Controller{
			{Name: "none"}, {Name: "moirai", Patched: true}, {Name: "timeout"}, {Name: "ratelimit"},
		},
		DefaultDuration: 2 * time.Second, DefaultWarmup: time.Second,
		Size: "keys", DefaultSize: 1000,
		Params:           func(o serversuite.Options) map[string]string { return map[string]string{"server": "kv"} },
		FailuresMeasured: failuresMeasured, Failed: "failed", Limiter: true,
	}
}

func TestSelect(t *testing.T) {
	s := suite(false)
	cs, ctls, err := s.Select("all", "none,moirai")
	if err != nil || len(cs) != 2 || len(ctls) != 2 || ctls[1].Name != "moirai" || !ctls[1].Patched {
		t.Fatalf("Select: %v %v %v", cs, ctls, err)
	}
	if _, _, err := s.Select("scan,nope", "all"); err == nil || !strings.Contains(err.Error(), `unknown "nope" (have scan, dump)`) {
		t.Errorf("unknown case: %v, want the names listed", err)
	}
	if _, _, err := s.Select("all", "pbox"); err == nil || !strings.Contains(err.Error(), "none, moirai, timeout, ratelimit") {
		t.Errorf("unknown controller: %v, want the names listed", err)
	}
}

var culprit = map[string]servertest.Run{
	"normal": {Factor: 1}, "none": {Factor: 10}, "moirai": {Factor: 1.5, Cancelled: 3}, "timeout": {Factor: 8}, "ratelimit": {Factor: 2},
}

func TestExecutePoolsAndNormalizes(t *testing.T) {
	s := suite(false)
	dir := servertest.Integration(t, s, culprit)
	cs, ctls, err := s.Select("scan", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(culprit)-1 {
		t.Fatalf("%d rows, want %d: %+v", len(res.Rows), len(culprit)-1, res.Rows)
	}
	for _, r := range res.Rows {
		f := culprit[r.Controller].Factor
		if r.Suite != "kv" || r.Case != "scan" || r.Error != "" || math.Abs(r.P99Norm-f) > 1e-9 || math.Abs(r.ThroughputNorm-1/f) > 1e-9 || math.Abs(r.P99Ms-99*f) > 1e-9 {
			t.Errorf("%s: %s/%s p99_norm %v throughput_norm %v p99 %v (%s), want %v, %v, %v", r.Controller, r.Suite, r.Case, r.P99Norm, r.ThroughputNorm, r.P99Ms, r.Error, f, 1/f, 99*f)
		}
		if math.Abs(r.VictimMeanMs-50.5*f) > 1e-9 || math.Abs(r.VictimMeanNormalMs-50.5) > 1e-9 || math.Abs(r.VictimMeanUncontrolledMs-505) > 1e-9 {
			t.Errorf("%s: victims' mean %v (normal %v, uncontrolled %v), want %v, 50.5, 505", r.Controller, r.VictimMeanMs, r.VictimMeanNormalMs, r.VictimMeanUncontrolledMs, 50.5*f)
		}
		if r.Controller == "moirai" && (r.CulpritsCancelled != 6 || r.Cancelled != 6 || math.Abs(r.WorkLost-0.5) > 1e-9) {
			t.Errorf("moirai: %d culprits cancelled, %d cancellations, %v lost; want 6, 6 and 0.5 over two rounds", r.CulpritsCancelled, r.Cancelled, r.WorkLost)
		}
	}
	if got := res.Params["p99_norm by round: scan/moirai"]; got != "1.50, 1.50" {
		t.Errorf("moirai by round: %q", got)
	}
	if got := res.Params["kv"]; got != "example.com/kv v1.2.3; patch: 1 lines added, 0 removed" {
		t.Errorf("kv param: %q", got)
	}
	if got, want := res.Params["culprit: scan/moirai"], "8 sent: 2 completed, 6 cancelled by the controller, 0 timed out, 0 failed; 0 held back by the limiter; mean 0ms; work lost 0.50s"; got != want {
		t.Errorf("moirai's culprit: %q, want %q", got, want)
	}
	if res.Params["server"] != "kv" || res.Params["warm-up"] != "1s" || res.Duration != "2s" {
		t.Errorf("params %v, duration %s: want the suite's and the defaults", res.Params, res.Duration)
	}
}

func TestExecutePassesTheFlags(t *testing.T) {
	s := suite(false)
	dir := servertest.Integration(t, s, culprit)
	cs, ctls, err := s.Select("dump", "none,moirai")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls, Size: 5000, Seed: 7, Duration: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(servertest.Args(dir))
	if err != nil {
		t.Fatal(err)
	}
	want := "-culprit dump -keys 5000 -warmup 1s -duration 3s -seed 7 -runs normal,none -raw\n" +
		"-culprit dump -keys 5000 -warmup 1s -duration 3s -seed 7 -runs moirai -raw\n"
	if string(b) != want {
		t.Errorf("the load programs ran with\n%s\nwant\n%s", b, want)
	}
}

func TestExecuteFailedVictims(t *testing.T) {
	runs := map[string]servertest.Run{"normal": {Factor: 1}, "none": {Factor: 10}, "timeout": {Factor: 8, Failed: 10}}
	for _, measured := range []bool{true, false} {
		s := suite(measured)
		dir := servertest.Integration(t, s, runs)
		cs, ctls, err := s.Select("scan", "none,timeout")
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls, Rounds: 2})
		if err != nil {
			t.Fatal(err)
		}
		timeout := res.Rows[1]
		got := res.Params["victims failed: scan/timeout"]
		switch {
		case res.Rows[0].Error != "" || res.Rows[0].DropRate != 0:
			t.Errorf("measured %v: none %+v, want no failure", measured, res.Rows[0])
		case measured && (timeout.Error != "" || math.Abs(timeout.DropRate-20.0/220) > 1e-9 || got != "20 of 220; first: deadline"):
			t.Errorf("measured: timeout's error %q, drop rate %v, param %q: want the failures in the drop rate and the params", timeout.Error, timeout.DropRate, got)
		case !measured && (timeout.Error != "a victim failed: deadline" || got != ""):
			t.Errorf("not measured: timeout's error %q, param %q: want the row failed", timeout.Error, got)
		}
	}
}

func TestExecuteNoCulprit(t *testing.T) {
	s := suite(false)
	dir := servertest.Integration(t, s, map[string]servertest.Run{"normal": {Factor: 1}, "moirai-normal": {Factor: 1.1}})
	cs, ctls, err := s.Select("scan", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls, NoCulprit: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Rows[0].Controller != "none" || res.Rows[1].Controller != "moirai" {
		t.Fatalf("rows %+v, want none and moirai", res.Rows)
	}
	if r := res.Rows[0]; !r.NoCulprit || r.P99Norm != 1 {
		t.Errorf("none: %+v, want the noise row at 1", r)
	}
	if r := res.Rows[1]; math.Abs(r.P99Norm-1.1) > 1e-9 {
		t.Errorf("moirai: p99_norm %v, want 1.1", r.P99Norm)
	}
}

func TestExecuteReportsAFailedProcess(t *testing.T) {
	// The patched build knows no moirai run: its rows fail, the others not.
	s := suite(false)
	dir := servertest.Integration(t, s, map[string]servertest.Run{"normal": {Factor: 1}, "none": {Factor: 2}})
	cs, ctls, err := s.Select("scan", "none,moirai")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0].Error != "" || !strings.Contains(res.Rows[1].Error, "unknown run moirai") {
		t.Errorf("rows %+v: want none ok and moirai failed with the process's error", res.Rows)
	}
}

// A patched controller runs in a process of its own (a controller, or the
// oracle, per server), and the oracle, which acts only on the culprit, is
// not run without it.
func TestExecuteOracleRunsAlone(t *testing.T) {
	s := suite(false)
	s.Controllers = append(s.Controllers, serversuite.Controller{Name: "oracle", Patched: true, Oracle: true})
	runs := map[string]servertest.Run{"oracle": {Factor: 1.2, Cancelled: 4}, "moirai-normal": {Factor: 1}}
	for k, v := range culprit {
		runs[k] = v
	}
	for _, noCulprit := range []bool{false, true} {
		dir := servertest.Integration(t, s, runs)
		cs, ctls, err := s.Select("scan", "all")
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls, NoCulprit: noCulprit})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(servertest.Args(dir))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			_, r, _ := strings.Cut(l, "-runs ")
			r, _, _ = strings.Cut(r, " ")
			got = append(got, r)
		}
		var rows []string
		for _, r := range res.Rows {
			if r.Error != "" {
				t.Errorf("no culprit %v: row %s failed: %s", noCulprit, r.Controller, r.Error)
			}
			rows = append(rows, r.Controller)
		}
		want, wantRows := "normal,none,timeout,ratelimit moirai oracle", "none moirai timeout ratelimit oracle"
		if noCulprit {
			want, wantRows = "normal,normal moirai-normal", "none moirai"
		}
		if strings.Join(got, " ") != want || strings.Join(rows, " ") != wantRows {
			t.Errorf("no culprit %v: processes' runs %q, rows %q; want %q, %q", noCulprit, got, rows, want, wantRows)
		}
	}
}

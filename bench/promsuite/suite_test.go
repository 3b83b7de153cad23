package promsuite

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelect(t *testing.T) {
	cs, ctls, err := Select("all", "none,moirai")
	if err != nil || len(cs) != len(Cases()) || len(ctls) != 2 || ctls[1].Name != "moirai" || !ctls[1].patched {
		t.Fatalf("Select: %v %v %v", cs, ctls, err)
	}
	if _, _, err := Select("dashboard,nope", "all"); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("unknown case: %v, want the names listed", err)
	}
	if _, _, err := Select("all", "pbox"); err == nil || !strings.Contains(err.Error(), "none, moirai, timeout, max-samples, concurrency") {
		t.Errorf("unknown controller: %v, want the names listed", err)
	}
}

// fakeIntegration writes a module whose cmd/prombuild "builds" two shell
// scripts standing for the released and the patched promload: each prints
// one result per run of -runs, its victims' latencies 1..100 ms times the
// run's factor (so its p99 is 99 × factor), its throughput 600/factor.
func fakeIntegration(t *testing.T, factor map[string]float64) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("prometheus.patch", "+x\n", 0o644)
	write("go.mod", "module fake\n\ngo 1.25\n", 0o644)
	for _, b := range []struct {
		name    string
		patched bool
	}{{"released", false}, {"patched", true}} {
		var cases strings.Builder
		for run, f := range factor {
			lat := make([]string, 100)
			for i := range lat {
				lat[i] = fmt.Sprint(float64(i+1) * f)
			}
			cancelled, failed := 0, 0
			if run == "moirai" {
				cancelled = 3
			}
			if run == "timeout" {
				failed = 10 // the engine's timeout fails victims too
			}
			fmt.Fprintf(&cases, "  %s) echo '{\"run\":\"%s\",\"patched\":%v,\"victims\":%d,\"victims_ok\":100,\"victims_failed\":%d,\"first_error\":\"deadline\",\"throughput\":%v,\"slo_attainment\":0.5,\"culprit_sent\":4,\"culprit_cancelled\":%d,\"culprit_ok\":%d,\"work_lost\":0.25,\"controller_cancellations\":%d,\"latencies_ms\":[%s]}';;\n",
				run, run, b.patched, 100+failed, failed, 600/f, cancelled, 4-cancelled, cancelled, strings.Join(lat, ","))
		}
		write(b.name+".sh", `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -runs ] && runs=$2; shift; done
for r in $(echo "$runs" | tr , ' '); do
case $r in
`+cases.String()+`  *) echo "unknown run $r" >&2; exit 1;;
esac
done
`, 0o755)
	}
	write("cmd/prombuild/main.go", fmt.Sprintf(`package main

import "fmt"

func main() {
	fmt.Printf(%q)
}
`, fmt.Sprintf(`{"released":%q,"patched":%q,"server":"v0.316.0","added":1}`+"\n",
		filepath.Join(dir, "released.sh"), filepath.Join(dir, "patched.sh"))), 0o644)
	return dir
}

func TestExecutePoolsAndNormalizes(t *testing.T) {
	dir := fakeIntegration(t, map[string]float64{"normal": 1, "none": 10, "moirai": 1.5, "timeout": 8, "max-samples": 2, "concurrency": 3})
	cs, ctls, err := Select("dashboard", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(context.Background(), Options{Dir: dir, Cases: cs, Controllers: ctls, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"none": 10, "moirai": 1.5, "timeout": 8, "max-samples": 2, "concurrency": 3}
	if len(res.Rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(res.Rows), len(want), res.Rows)
	}
	for _, r := range res.Rows {
		f := want[r.Controller]
		if r.Error != "" || math.Abs(r.P99Norm-f) > 1e-9 || math.Abs(r.ThroughputNorm-1/f) > 1e-9 || math.Abs(r.P99Ms-99*f) > 1e-9 {
			t.Errorf("%s: p99_norm %v throughput_norm %v p99 %v (%s), want %v, %v, %v", r.Controller, r.P99Norm, r.ThroughputNorm, r.P99Ms, r.Error, f, 1/f, 99*f)
		}
		if math.Abs(r.VictimMeanMs-50.5*f) > 1e-9 || math.Abs(r.VictimMeanNormalMs-50.5) > 1e-9 || math.Abs(r.VictimMeanUncontrolledMs-505) > 1e-9 {
			t.Errorf("%s: victims' mean %v (normal %v, uncontrolled %v), want %v, 50.5, 505", r.Controller, r.VictimMeanMs, r.VictimMeanNormalMs, r.VictimMeanUncontrolledMs, 50.5*f)
		}
		if r.Controller == "moirai" && (r.CulpritsCancelled != 6 || r.Cancelled != 6 || math.Abs(r.WorkLost-0.5) > 1e-9) {
			t.Errorf("moirai: %d culprits cancelled, %d cancellations, %v lost; want 6, 6 and 0.5 over two rounds", r.CulpritsCancelled, r.Cancelled, r.WorkLost)
		}
	}
	for _, r := range res.Rows {
		if want := map[bool]float64{true: 20.0 / 220, false: 0}[r.Controller == "timeout"]; math.Abs(r.DropRate-want) > 1e-9 {
			t.Errorf("%s: drop rate %v, want %v (failed victims are measured, not a failed row)", r.Controller, r.DropRate, want)
		}
	}
	if got := res.Params["victims failed: dashboard/timeout"]; got != "20 of 220; first: deadline" {
		t.Errorf("timeout's failed victims: %q", got)
	}
	if got := res.Params["p99_norm by round: dashboard/moirai"]; got != "1.50, 1.50" {
		t.Errorf("moirai by round: %q", got)
	}
	if got := res.Params["prometheus"]; !strings.Contains(got, "1 lines added") {
		t.Errorf("prometheus param: %q", got)
	}
}

func TestExecuteNoCulprit(t *testing.T) {
	dir := fakeIntegration(t, map[string]float64{"normal": 1, "moirai-normal": 1.1})
	cs, ctls, err := Select("dashboard", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(context.Background(), Options{Dir: dir, Cases: cs, Controllers: ctls, NoCulprit: true})
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
	dir := fakeIntegration(t, map[string]float64{"normal": 1, "none": 2})
	cs, ctls, err := Select("dashboard", "none,moirai")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(context.Background(), Options{Dir: dir, Cases: cs, Controllers: ctls})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0].Error != "" || !strings.Contains(res.Rows[1].Error, "unknown run moirai") {
		t.Errorf("rows %+v: want none ok and moirai failed with the process's error", res.Rows)
	}
}

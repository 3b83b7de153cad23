package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench"
)

func TestBenchList(t *testing.T) {
	out, _, err := run(t, "bench", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inproc", "table-lock", "worker-slots", "CONTROLLER", "none"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench list lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchRunBadInput: unknown names list the valid ones, a duration too
// short is refused with the minimum, and an unwritable --out fails before
// anything runs; all exit 2 except the unwritable directory.
func TestBenchRunBadInput(t *testing.T) {
	tests := []struct {
		args     []string
		want     string
		exitCode int
	}{
		{[]string{"bench", "run", "--case", "nope"}, "table-lock", ExitBadArgs},
		{[]string{"bench", "run", "--controller", "nope"}, "valid: none", ExitBadArgs},
		{[]string{"bench", "run", "--suite", "nope"}, "suite", ExitBadArgs},
		{[]string{"bench", "run", "--duration", "100ms"}, "minimum is 1s", ExitBadArgs},
		{[]string{"bench", "run", "--case", "table-lock", "--out", "/proc/moirai-cannot-write"}, "--out", ExitError},
		{[]string{"bench", "report"}, "--in is required", ExitBadArgs},
	}
	for _, tt := range tests {
		_, _, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != tt.exitCode {
			t.Errorf("%q: err %v (exit %d), want %q and exit %d", tt.args, err, exitCode(err), tt.want, tt.exitCode)
		}
	}
}

// TestBenchRunWritesResults runs one short case and checks the JSON rows,
// results.json, report.html, and the report command.
func TestBenchRunWritesResults(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "bench", "run", "--case", "table-lock", "--controller", "none", "--duration", "1s", "--out", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &row); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	for _, k := range []string{"suite", "case", "controller", "throughput_norm", "p99_norm", "drop_rate", "cancelled",
		"culprits_cancelled", "victims_cancelled", "rejected", "slo_attainment",
		"victim_mean_normal_ms", "victim_mean_uncontrolled_ms", "victim_mean_ms"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row lacks %q: %v", k, row)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Results
	if err := json.Unmarshal(b, &res); err != nil || len(res.Rows) != 1 || len(res.Runs) != 2 {
		t.Fatalf("results.json: %v, %d rows, %d runs", err, len(res.Rows), len(res.Runs))
	}
	if html, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(html), "<svg") {
		t.Errorf("report.html: %v", err)
	}
	md := filepath.Join(dir, "RESULTS.md")
	if _, _, err := run(t, "bench", "report", "--in", filepath.Join(dir, "results.json"), "--md", md); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(md); err != nil || !strings.Contains(string(b), "table-lock") {
		t.Errorf("RESULTS.md: %v\n%s", err, b)
	}
}

func TestBenchRunCPUBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "run", "--suite", "cpu", "--case", "k9"}, "valid: k1, k2, k3, k4"},
		{[]string{"bench", "run", "--suite", "cpu", "--controller", "none"}, "valid: ignorant, optimal"},
		{[]string{"bench", "run", "--suite", "cpu", "--warmup", "2s"}, "warm-up under half"},
		{[]string{"bench", "run", "--suite", "cpu", "--fib", "99"}, "--fib 99"},
		{[]string{"bench", "run", "--suite", "cpu", "--load", "0"}, "--load 0"},
		{[]string{"bench", "run", "--suite", "cpu", "--rounds", "0"}, "--rounds 0"},
		{[]string{"bench", "run", "--suite", "tree", "--rounds", "101"}, "--rounds 101"},
		{[]string{"bench", "run", "--suite", "etcd", "--rounds", "0"}, "--rounds 0"},
		{[]string{"bench", "run", "--suite", "etcd", "--case", "k9"}, "keys-only, full-range"},
		{[]string{"bench", "run", "--suite", "etcd", "--controller", "pbox"}, "none, moirai, oracle, timeout, ratelimit, paginate"},
		{[]string{"bench", "run", "--suite", "etcd", "--culprit", "stream"}, "--culprit"},
		{[]string{"bench", "run", "--suite", "prometheus", "--rounds", "0"}, "--rounds 0"},
		{[]string{"bench", "run", "--suite", "prometheus", "--series", "10"}, "--series 10"},
		{[]string{"bench", "run", "--suite", "prometheus", "--case", "k9"}, "dashboard"},
		{[]string{"bench", "run", "--suite", "prometheus", "--controller", "pbox"}, "none, moirai, oracle, timeout, max-samples, concurrency"},
		{[]string{"bench", "run", "--suite", "prometheus", "--keys", "5000"}, "--keys applies to suite etcd only"},
		{[]string{"bench", "worker-cpu", "--config", "{"}, "--config"},
	} {
		_, _, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != ExitBadArgs {
			t.Errorf("%q: err %v (exit %d), want %q and exit %d", tt.args, err, exitCode(err), tt.want, ExitBadArgs)
		}
	}
}

func TestBenchListCPU(t *testing.T) {
	out, _, err := run(t, "bench", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu ", "k4", "friendly-o2", "rogue", "ignorant", "keys-only", "paginate"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench list lacks %q:\n%s", want, out)
		}
	}
}

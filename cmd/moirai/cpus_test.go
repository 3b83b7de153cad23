package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCPUs(t *testing.T) {
	out, _, err := run(t, "cpus", "--interval", "20ms")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"budget ", "derivation", "SOURCE", "affinity"} {
		if !strings.Contains(out, want) {
			t.Errorf("cpus lacks %q:\n%s", want, out)
		}
	}
}

func TestCPUsJSON(t *testing.T) {
	out, _, err := run(t, "cpus", "--interval", "20ms", "-o", "json", "--overcommit", "2")
	if err != nil {
		t.Fatal(err)
	}
	var rep cpusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Budget.CPUs <= 0 || len(rep.Budget.Steps) == 0 {
		t.Errorf("budget %+v", rep.Budget)
	}
	if rep.Share != nil && (rep.Share.Active < 1 || rep.Share.Overcommit != 2) {
		t.Errorf("share %+v", rep.Share)
	}
}

// TestCPUsFakeRoot reads a fake machine: a cgroup v2 quota of 1.5 CPUs,
// and no /proc/stat to measure a share from.
func TestCPUsFakeRoot(t *testing.T) {
	out, _, err := run(t, "cpus", "--root", "../../cpu/testdata/v2", "--interval", "10ms")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1.5 CPUs (cgroup quota; host 4, affinity 4)", "150000 100000", "clock tick  unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("cpus lacks %q:\n%s", want, out)
		}
	}
}

func TestCPUsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"cpus", "--interval", "1ms"},
		{"cpus", "--overcommit", "0"},
		{"cpus", "--pid", "-3"},
		{"cpus", "extra"},
	} {
		if _, _, err := run(t, args...); err == nil || exitCode(err) != ExitBadArgs {
			t.Errorf("%q: err %v, want exit %d", args, err, ExitBadArgs)
		}
	}
}

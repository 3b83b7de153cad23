// Package servertest stands in for an integration module in the tests of
// package serversuite and of the suites it runs: a module whose build
// command "builds" two shell scripts for the released and the patched load
// program.
package servertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/bench/serversuite"
)

// Run is what a fake load program prints for one run of -runs: its
// victims' latencies are 1..100 ms times Factor (so its p99 is 99 ×
// Factor), its throughput 600/Factor; Failed more victims failed, with the
// error "deadline"; Cancelled of its 4 culprit requests were cancelled by
// the controller.
type Run struct {
	Factor            float64
	Failed, Cancelled int
}

// Integration writes a fake integration module for suite s whose builds
// print the runs named in runs (any other run fails the process) and
// returns its directory. Each build process appends its arguments, one
// line a process, to the file Args names.
func Integration(t *testing.T, s *serversuite.Suite, runs map[string]Run) string {
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
	write(s.Module+".patch", "+x\n", 0o644)
	write("go.mod", "module fake\n\ngo 1.25\n", 0o644)
	for _, b := range []struct {
		name    string
		patched bool
	}{{"released", false}, {"patched", true}} {
		var cases strings.Builder
		for name, r := range runs {
			lat := make([]string, 100)
			for i := range lat {
				lat[i] = fmt.Sprint(float64(i+1) * r.Factor)
			}
			firstError := ""
			if r.Failed > 0 {
				firstError = "deadline"
			}
			fmt.Fprintf(&cases, "  %s) echo '{\"run\":\"%s\",\"patched\":%v,\"victims\":%d,\"victims_ok\":100,\"victims_failed\":%d,\"first_error\":\"%s\",\"throughput\":%v,\"slo_attainment\":0.5,\"culprit_sent\":4,\"culprit_cancelled\":%d,\"culprit_ok\":%d,\"work_lost\":0.25,\"controller_cancellations\":%d,\"latencies_ms\":[%s]}';;\n",
				name, name, b.patched, 100+r.Failed, r.Failed, firstError, 600/r.Factor, r.Cancelled, 4-r.Cancelled, r.Cancelled, strings.Join(lat, ","))
		}
		write(b.name+".sh", `#!/bin/sh
echo "$@" >> "`+Args(dir)+`"
while [ $# -gt 0 ]; do [ "$1" = -runs ] && runs=$2; shift; done
for r in $(echo "$runs" | tr , ' '); do
case $r in
`+cases.String()+`  *) echo "unknown run $r" >&2; exit 1;;
esac
done
`, 0o755)
	}
	write(filepath.Join(s.Build, "main.go"), fmt.Sprintf(`package main

import "fmt"

func main() {
	fmt.Printf(%q)
}
`, fmt.Sprintf(`{"released":%q,"patched":%q,"server":"v1.2.3","added":1}`+"\n",
		filepath.Join(dir, "released.sh"), filepath.Join(dir, "patched.sh"))), 0o644)
	return dir
}

// Args is the file of the fake integration in dir to which its load
// programs append their arguments.
func Args(dir string) string { return filepath.Join(dir, "args") }

package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/analysis/vet"
)

// module writes a one-package module to a temporary directory and makes
// it the current one.
func module(t *testing.T, src string) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"go.mod": "module example.com/m\n\ngo 1.25\n", "m.go": src}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
}

func TestVetFindings(t *testing.T) {
	module(t, `package m

import (
	"sync"
	"time"
)

var mu sync.Mutex

func Slow() {
	mu.Lock()
	defer mu.Unlock()
	time.Sleep(time.Millisecond)
}
`)
	out, _, err := run(t, "vet", "-o", "json")
	if !errors.Is(err, errFindings) || exitCode(err) != ExitFindings {
		t.Fatalf("vet: err %v (exit %d), want findings (exit %d)", err, exitCode(err), ExitFindings)
	}
	var rep vet.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("vet -o json printed %q: %v", out, err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Analyzer != "sharedlock" {
		t.Errorf("findings = %+v, want one of sharedlock", rep.Findings)
	}
}

func TestVetTypeErrors(t *testing.T) {
	module(t, "package m\n\nfunc F() { undefined() }\n")
	_, stderr, err := run(t, "vet")
	if err == nil || exitCode(err) != ExitError || !strings.Contains(stderr, "undefined") {
		t.Errorf("vet on a broken package: err %v, stderr %q; want an error naming the undefined name", err, stderr)
	}
}

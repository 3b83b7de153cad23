package vet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/analysis/vet"
)

// Options is vet.Options, short for the tests.
type Options = vet.Options

// handInstrumented lists the resources bench/inproc instruments by hand,
// by case, with the pattern of a diagnostic that finds the resource in
// the case's rewrite with raw standard-library primitives
// (testdata/src/recall). A nil pattern is a resource no analyzer is meant
// to find.
var handInstrumented = []struct {
	pkg, resource, kind string
	finds               *regexp.Regexp
}{
	{"backuplock", "global-read-lock", "RWMutex", regexp.MustCompile(`^sync.RWMutex global `)},
	{"backuplock", "table:t0..t7", "Mutex", regexp.MustCompile(`^sync.Mutex table `)},
	{"bufferpool", "buffer-pool", "Memory", regexp.MustCompile(`^type lru looks like a cache`)},
	{"cachepollution", "query-cache", "Memory", regexp.MustCompile(`^type lru looks like a cache`)},
	{"cpuheavy", "cpu", "raw (KindCPU)", regexp.MustCompile(`^buffered channel cpuTokens.tokens .* counting semaphore`)},
	{"heappressure", "go-heap", "Memory", nil},
	{"kvrange", "kv:index", "RWMutex", regexp.MustCompile(`^sync.RWMutex index `)},
	{"tablelock", "table:orders", "Mutex", regexp.MustCompile(`^sync.Mutex table `)},
	{"tworesources", "buffer-pool", "Memory", regexp.MustCompile(`^type lru looks like a cache`)},
	{"tworesources", "table:orders", "Mutex", regexp.MustCompile(`^sync.Mutex table `)},
	{"undopurge", "undo-log", "Mutex", regexp.MustCompile(`^sync.Mutex undo `)},
	{"walgroup", "wal-writer", "Mutex", regexp.MustCompile(`^sync.Mutex wal `)},
	{"workerslots", "worker-slots", "Semaphore", regexp.MustCompile(`^semaphore.Weighted slots `)},
}

// gopath returns the environment and directory that load testdata/src
// as a GOPATH, the layout analysistest uses.
func gopath(t *testing.T, dir string) Options {
	t.Helper()
	root, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Dir: filepath.Join(root, "src", dir),
		Env: append(os.Environ(), "GOPATH="+root, "GO111MODULE=off", "GOFLAGS=", "GOWORK=off"),
	}
}

// TestRecall runs every analyzer on the recall corpus and measures the
// share of bench/inproc's hand-instrumented resources they find. Run it
// with -v to print the table docs/VET.md shows.
func TestRecall(t *testing.T) {
	rep, err := vet.Run(context.Background(), []string{"./..."}, gopath(t, "recall"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("errors: %q", rep.Errors)
	}
	found := map[string][]vet.Finding{} // case → findings
	for _, f := range rep.Findings {
		_, rest, _ := strings.Cut(filepath.ToSlash(f.Pos), "/recall/")
		pkg, _, _ := strings.Cut(rest, "/")
		found[pkg] = append(found[pkg], f)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| case | resource | moirai primitive | found by |\n|---|---|---|---|\n")
	hits, matched := 0, map[string]bool{}
	for _, want := range handInstrumented {
		by := "—"
		if want.finds != nil {
			for _, f := range found[want.pkg] {
				if want.finds.MatchString(f.Message) {
					by = f.Analyzer
					matched[keyOf(f)] = true
					break
				}
			}
		}
		if by != "—" {
			hits++
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", want.pkg, want.resource, want.kind, by)
	}
	recall := float64(hits) / float64(len(handInstrumented))
	fmt.Fprintf(&table, "\nrecall: %d of %d = %.0f %%\n\nother findings:\n", hits, len(handInstrumented), 100*recall)
	for _, pkg := range sortedKeys(found) {
		for _, f := range found[pkg] {
			if !matched[keyOf(f)] {
				fmt.Fprintf(&table, "- %s: %s: %s\n", pkg, f.Analyzer, f.Message)
			}
		}
	}
	t.Log("\n" + table.String())
	if recall < 0.85 {
		t.Errorf("recall %.2f, want at least 0.85", recall)
	}
}

func keyOf(f vet.Finding) string { return f.Analyzer + f.Pos + f.Message }

func sortedKeys(m map[string][]vet.Finding) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

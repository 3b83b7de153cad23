package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/bench"
)

// savedDir is the repository's docs/bench, from this package.
const savedDir = "../../docs/bench"

// maxSaved bounds the size of docs/bench, in bytes.
const maxSaved = 1_000_000

// savedInputs returns the --in files of the report command in
// docs/bench/README.md, in order, as paths from this package.
func savedInputs(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(savedDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, ok := strings.Cut(string(readme[bytes.Index(readme, []byte("bench report")):]), "--summary docs/bench/summary.md --md docs/RESULTS.md --figures docs/bench")
	if !ok {
		t.Fatal("docs/bench/README.md: no `bench report … --summary docs/bench/summary.md --md docs/RESULTS.md --figures docs/bench` command")
	}
	var in []string
	for _, m := range regexp.MustCompile(`--in (docs/bench/\S+\.json)`).FindAllStringSubmatch(cmd, -1) {
		in = append(in, filepath.Join("../..", m[1]))
	}
	return in
}

// TestSavedResultsRegenerateTheReports checks that the command of
// docs/bench/README.md, run on the saved files, writes docs/RESULTS.md and
// the figures as they are committed; that every saved file is in it and
// trimmed; and that docs/bench stays small.
func TestSavedResultsRegenerateTheReports(t *testing.T) {
	in := savedInputs(t)
	saved, err := filepath.Glob(filepath.Join(savedDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(saved)
	if got := slices.Sorted(slices.Values(in)); !slices.Equal(got, saved) {
		t.Errorf("the report command of docs/bench/README.md reads %v; docs/bench holds %v", got, saved)
	}

	var all []*bench.Results
	for _, path := range in {
		r, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
		// Trimmed: trimming it again writes the same bytes.
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		again := filepath.Join(t.TempDir(), "again.json")
		if err := SaveTrimmed(again, r); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(again); !bytes.Equal(got, want) {
			t.Errorf("%s is not trimmed: run go run ./cmd/moirai bench trim --in %[1]s --out %[1]s from the repository's root", strings.TrimPrefix(path, "../../"))
		}
	}

	summary, err := os.ReadFile(filepath.Join(savedDir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The summary quotes saved files by name: each must be one of them.
	for _, m := range regexp.MustCompile("`([a-z0-9-]+\\.json)`").FindAllStringSubmatch(string(summary), -1) {
		if !slices.Contains(in, filepath.Join(savedDir, m[1])) {
			t.Errorf("docs/bench/summary.md quotes %s, which the report command does not read", m[1])
		}
	}
	var md bytes.Buffer
	if err := MarkdownAll(&md, all, WithSummary(string(summary))); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), md.String()); diff != "" {
		t.Errorf("docs/RESULTS.md is not what the command of docs/bench/README.md writes (-committed +regenerated):\n%s", diff)
	}
	figures := 0
	for _, r := range all {
		for name, svg := range PathfenceFigures(r) {
			figures++
			want, err := os.ReadFile(filepath.Join(savedDir, name))
			if err != nil {
				t.Errorf("figure %s: %v", name, err)
				continue
			}
			if string(want) != svg+"\n" {
				t.Errorf("docs/bench/%s is not what the command of docs/bench/README.md writes", name)
			}
		}
	}
	if figures == 0 {
		t.Error("no figure regenerated from the saved results")
	}

	var size int64
	ents, err := os.ReadDir(savedDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if size >= maxSaved {
		t.Errorf("docs/bench holds %d bytes, want under %d", size, maxSaved)
	}
}

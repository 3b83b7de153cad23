package vet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/analysis/vet"
)

// TestBadInput: a package that does not type-check is an error of the
// report, not a failure of the run; the others are analysed; a generated
// file is not reported on.
func TestBadInput(t *testing.T) {
	rep, err := vet.Run(context.Background(), []string{"./..."}, gopath(t, "bad"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "undefined") {
		t.Errorf("errors = %q, want one about the undefined name", rep.Errors)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, filepath.Base(filepath.Dir(f.Pos))+" "+f.Analyzer)
	}
	if diff := cmp.Diff([]string{"fine sharedlock"}, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// TestFix: without Fix nothing is written; with it the suggested fixes
// are applied and the file formatted.
func TestFix(t *testing.T) {
	src, err := os.ReadFile("testdata/src/fixme/fixme.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/src/fixme/fixme.go.golden")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "src", "fixme")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "fixme.go")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := vet.Options{Dir: dir, Env: append(os.Environ(), "GOPATH="+root, "GO111MODULE=off", "GOFLAGS=", "GOWORK=off")}

	rep, err := vet.Run(context.Background(), []string{"."}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Fixes != 1 {
		t.Fatalf("findings = %+v, want one with a fix", rep.Findings)
	}
	if got, _ := os.ReadFile(file); string(got) != string(src) {
		t.Fatalf("Run without Fix rewrote the file:\n%s", got)
	}

	opts.Fix = true
	rep, err = vet.Run(context.Background(), []string{"."}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Fixed) != 1 {
		t.Errorf("fixed %q, want the one file", rep.Fixed)
	}
	got, _ := os.ReadFile(file)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("fixed file (-want +got):\n%s", diff)
	}
}

package serverbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestCount(t *testing.T) {
	p := "--- a/x.go\n+++ b/x.go\n@@ -1,3 +1,4 @@\n ctx\n-old\n+new\n+\n+more\n"
	if a, r := Count([]byte(p)); a != 3 || r != 1 {
		t.Errorf("Count: +%d -%d, want +3 -1", a, r)
	}
}

// TestCopyAndApply copies a tree the way Build copies the module cache's
// read-only source, and patches the copy.
func TestCopyAndApply(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("neither patch nor git")
		}
	}
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(filepath.Join(src, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "x.go"), []byte("package a\n\nvar old = 1\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(t.TempDir(), "p.patch")
	diff := "--- a/a/x.go\n+++ b/a/x.go\n@@ -1,3 +1,3 @@\n package a\n \n-var old = 1\n+var patched = 2\n"
	if err := os.WriteFile(patch, []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := apply(context.Background(), dst, patch); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "a", "x.go"))
	if err != nil || string(got) != "package a\n\nvar patched = 2\n" {
		t.Errorf("patched copy: %q, %v", got, err)
	}
	if orig, _ := os.ReadFile(filepath.Join(src, "a", "x.go")); string(orig) != "package a\n\nvar old = 1\n" {
		t.Errorf("the source changed: %q", orig)
	}
}

func TestBuildRefusesAFullDirectory(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Spec{ServerModule: "example.com/x", PatchFile: "x.patch", Load: "xload"}, t.TempDir(), out); err == nil {
		t.Error("Build into a directory that is not empty: no error")
	}
}

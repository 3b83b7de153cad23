package apicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seams are the package-level variables of the module's internal
// packages through which one package reaches another's code; every other
// call between the library's packages is a direct one (docs/RUNTIME.md,
// "The boundary"). A new entry needs the reason docs/RUNTIME.md gives
// for these.
var seams = []string{
	"internal/mwx.IgnoredCulprit",
	"internal/mwx.NoTrustedPeer",
	"internal/mwx.RetryOn",
	"internal/resrt.Arm",
	"internal/resrt.ArmPreempt",
	"internal/resrt.NewMutex",
	"internal/resrt.NewQueue",
	"internal/resrt.NewSemaphore",
}

// TestFewSeams fails on a package-level variable, exported or not, of
// one of the root module's internal packages that can hold code another
// package put there: a function, an empty interface, or a (pointer to a)
// struct with two or more function fields (a hook table). It also fails
// on an entry of seams that is no longer there.
func TestFewSeams(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the whole module's export data")
	}
	_, export := rootPackages(t)
	pkgs := internalPackages(t)
	if len(pkgs) < 5 {
		t.Fatalf("found %d internal packages, want the module's", len(pkgs))
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
	var found []string
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		conf := types.Config{Importer: imp}
		pkg, err := conf.Check(p.ImportPath, fset, files, nil)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		rel := strings.TrimPrefix(p.ImportPath, "github.com/moirai-go/moirai/")
		for _, name := range pkg.Scope().Names() {
			if v, ok := pkg.Scope().Lookup(name).(*types.Var); ok && holdsCode(v.Type()) {
				found = append(found, rel+"."+name)
			}
		}
	}
	for _, f := range found {
		if !slices.Contains(seams, f) {
			t.Errorf("%s can hold another package's code: call that code directly, or list the seam with its reason", f)
		}
	}
	for _, s := range seams {
		if !slices.Contains(found, s) {
			t.Errorf("seam %s is gone: take it off the list", s)
		}
	}
}

// holdsCode reports whether a variable of type typ can hold code: a
// function, an empty interface, or a (pointer to a) struct with two or
// more function fields.
func holdsCode(typ types.Type) bool {
	if p, ok := typ.Underlying().(*types.Pointer); ok {
		typ = p.Elem()
	}
	switch u := typ.Underlying().(type) {
	case *types.Signature:
		return true
	case *types.Interface:
		return u.Empty()
	case *types.Struct:
		n := 0
		for f := range u.Fields() {
			if _, ok := f.Type().Underlying().(*types.Signature); ok {
				n++
			}
		}
		return n >= 2
	}
	return false
}

// pkgFiles is what `go list -json` says of a package's sources.
type pkgFiles struct {
	ImportPath string
	Dir        string
	GoFiles    []string
}

// internalPackages lists the root module's internal packages.
func internalPackages(t *testing.T) []pkgFiles {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-json", "./internal/...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkgFiles
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgFiles
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if len(p.GoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

package apicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
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

// listed is what `go list -export -json` says of one package.
type listed struct {
	ImportPath string
	Export     string
	Standard   bool
	Module     *struct{ Path string }
}

// rootPackages lists the root module's packages and the export data of
// every package they depend on.
func rootPackages(t *testing.T) (roots []string, export map[string]string) {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	export = make(map[string]string)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		export[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/moirai-go/moirai" && !internal(p.ImportPath) {
			roots = append(roots, p.ImportPath)
		}
	}
	return roots, export
}

// internal reports whether path is an internal package's, which only the
// module itself may import.
func internal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// TestNoInternalTypesInAPI fails on every exported function, method (of an
// exported type, promoted ones included, and of an exported interface),
// struct field, variable or constant whose type mentions a named type
// declared in an internal package, unless a public package declares an
// alias of that type (package task's aliases of internal/taskx's types):
// a caller names it by the alias. The members of such a type are checked
// as those of a type the public package declares.
func TestNoInternalTypesInAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the whole module's export data")
	}
	roots, export := rootPackages(t)
	if len(roots) < 10 {
		t.Fatalf("found %d packages in the root module, want the library's", len(roots))
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
	var pkgs []*types.Package
	for _, path := range roots {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		pkgs = append(pkgs, pkg)
	}
	pub := published(pkgs)
	if len(pub) == 0 {
		t.Fatal("no public alias of an internal type: package task's aliases of internal/taskx are gone?")
	}
	var found []string
	for _, pkg := range pkgs {
		found = append(found, exposed(pkg, pub)...)
	}
	for _, f := range found {
		t.Error(f)
	}
	if len(found) > 0 {
		t.Logf("%d exported declarations mention an internal type: unexport them or give them a public type", len(found))
	}
}

// published returns the internal named types that an exported alias of
// one of pkgs names, each with the alias's qualified name.
func published(pkgs []*types.Package) map[*types.TypeName]string {
	pub := map[*types.TypeName]string{}
	for _, pkg := range pkgs {
		for _, name := range pkg.Scope().Names() {
			obj, ok := pkg.Scope().Lookup(name).(*types.TypeName)
			if !ok || !obj.Exported() || !obj.IsAlias() {
				continue
			}
			if n, ok := types.Unalias(obj.Type()).(*types.Named); ok && n.Obj().Pkg() != nil && internal(n.Obj().Pkg().Path()) {
				pub[n.Obj()] = pkg.Path() + "." + name
			}
		}
	}
	return pub
}

// exposed lists pkg's exported declarations that mention an internal type
// that no alias in pub names.
func exposed(pkg *types.Package, pub map[*types.TypeName]string) []string {
	var found []string
	report := func(what string, typ types.Type) {
		if n := internalIn(typ, pub, map[types.Type]bool{}); n != "" {
			found = append(found, fmt.Sprintf("%s.%s mentions %s", pkg.Path(), what, n))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func, *types.Var, *types.Const:
			report(name, obj.Type())
		case *types.TypeName:
			typ := obj.Type()
			if obj.IsAlias() {
				n, ok := types.Unalias(typ).(*types.Named)
				if !ok || pub[n.Obj()] == "" {
					report(name, typ)
					continue
				}
				typ = n // a published internal type: check its members here
			}
			switch u := typ.Underlying().(type) {
			case *types.Struct:
				for f := range u.Fields() {
					if f.Exported() {
						report(name+"."+f.Name(), f.Type())
					}
				}
			case *types.Interface:
				for m := range u.Methods() {
					if m.Exported() {
						report(name+"."+m.Name(), m.Type())
					}
				}
				continue
			default:
				report(name, u)
			}
			ms := types.NewMethodSet(types.NewPointer(typ))
			for sel := range ms.Methods() {
				if sel.Obj().Exported() {
					report(name+"."+sel.Obj().Name(), sel.Type())
				}
			}
		}
	}
	return found
}

// internalIn returns the first named type from an internal package that
// typ mentions and that no alias in pub names, looking through composite
// types but not into other named types (those are checked where they are
// declared), or "".
func internalIn(typ types.Type, pub map[*types.TypeName]string, seen map[types.Type]bool) string {
	if seen[typ] {
		return ""
	}
	seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && internal(p.Path()) && pub[t.Obj()] == "" {
			return p.Path() + "." + t.Obj().Name()
		}
		for a := range t.TypeArgs().Types() {
			if n := internalIn(a, pub, seen); n != "" {
				return n
			}
		}
	case *types.Alias:
		return internalIn(types.Unalias(t), pub, seen)
	case *types.Pointer:
		return internalIn(t.Elem(), pub, seen)
	case *types.Slice:
		return internalIn(t.Elem(), pub, seen)
	case *types.Array:
		return internalIn(t.Elem(), pub, seen)
	case *types.Chan:
		return internalIn(t.Elem(), pub, seen)
	case *types.Map:
		if n := internalIn(t.Key(), pub, seen); n != "" {
			return n
		}
		return internalIn(t.Elem(), pub, seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tup.Variables() {
				if n := internalIn(v.Type(), pub, seen); n != "" {
					return n
				}
			}
		}
	case *types.Struct:
		for f := range t.Fields() {
			if n := internalIn(f.Type(), pub, seen); n != "" {
				return n
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if n := internalIn(m.Type(), pub, seen); n != "" {
				return n
			}
		}
	}
	return ""
}

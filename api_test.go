package moirai_test

import (
	"bufio"
	"bytes"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
)

// TestNoInternalTypesInAPI checks the module's public face: no exported
// function or method of a package outside internal/ takes or returns a
// type declared under internal/, which a user could not name. It reads
// the packages' export data, as the compiler left it.
func TestNoInternalTypesInAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every package of the module")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-export", "-deps", "-f",
		"{{.ImportPath}}\t{{.Export}}\t{{if .Module}}{{.Module.Main}}{{end}}\t{{.Name}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	var public []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			continue
		}
		exports[f[0]] = f[1]
		if f[2] == "true" && f[3] != "main" && !isInternal(f[0]) {
			public = append(public, f[0])
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	for _, path := range public {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, bad := range internalInAPI(pkg) {
			t.Errorf("%s: %s", path, bad)
		}
	}
	if len(public) == 0 {
		t.Fatal("no package found")
	}
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalInAPI lists the exported functions and methods of pkg whose
// signature names a type from an internal package.
func internalInAPI(pkg *types.Package) []string {
	var bad []string
	check := func(name string, sig *types.Signature) {
		for _, tup := range []*types.Tuple{sig.Params(), sig.Results()} {
			for v := range tup.Variables() {
				if p := internalIn(v.Type(), map[types.Type]bool{}); p != "" {
					bad = append(bad, name+" uses "+p)
				}
			}
		}
	}
	scope := pkg.Scope()
	for _, n := range scope.Names() {
		obj := scope.Lookup(n)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Func:
			check(o.Name(), o.Type().(*types.Signature))
		case *types.TypeName:
			for m := range types.NewMethodSet(types.NewPointer(o.Type())).Methods() {
				if m.Obj().Exported() {
					check(o.Name()+"."+m.Obj().Name(), m.Type().(*types.Signature))
				}
			}
		}
	}
	return bad
}

// internalIn returns the name of an internal type that t is or is built
// from (through pointers, slices, maps, channels and function types), or "".
func internalIn(t types.Type, seen map[types.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		return internalIn(types.Unalias(t), seen)
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			return p.Path() + "." + t.Obj().Name()
		}
		for a := range t.TypeArgs().Types() {
			if s := internalIn(a, seen); s != "" {
				return s
			}
		}
	case *types.Pointer:
		return internalIn(t.Elem(), seen)
	case *types.Slice:
		return internalIn(t.Elem(), seen)
	case *types.Array:
		return internalIn(t.Elem(), seen)
	case *types.Chan:
		return internalIn(t.Elem(), seen)
	case *types.Map:
		if s := internalIn(t.Key(), seen); s != "" {
			return s
		}
		return internalIn(t.Elem(), seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tup.Variables() {
				if s := internalIn(v.Type(), seen); s != "" {
					return s
				}
			}
		}
	}
	return ""
}

// TestTaskMethodSet keeps a task's method set to what an application calls:
// the runtime's plumbing goes through internal/taskx.
func TestTaskMethodSet(t *testing.T) {
	const most = 15
	typ := reflect.TypeFor[*moirai.Task]()
	if n := typ.NumMethod(); n > most {
		var names []string
		for i := range n {
			names = append(names, typ.Method(i).Name)
		}
		t.Errorf("*moirai.Task has %d exported methods, want at most %d: %s", n, most, strings.Join(names, ", "))
	}
}

package moirai_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// wallClockAllowed lists the library's deliberate uses of the wall clock,
// by file and enclosing function, with the reason.
var wallClockAllowed = map[string]string{
	// The user-priority key period: entry services on different machines
	// must agree on it, which only the wall clock gives. A step moves users
	// to a new period early or late; it never stalls or misorders anything.
	"admit/priority.go:User": "shared period across machines",
	// A proxy's X-Request-Start is a wall-clock stamp by definition (it was
	// taken on another machine); the delay it gives is bounded by the
	// admitter's window (httpmw.WithArrival), so a step or a skew moves
	// one request's queueing time by at most that.
	"httpmw/admission.go:ParseRequestStart": "a proxy's wall-clock stamp, bounded by the window",
}

// TestMonotonicOnly: the library's timing (windows, intervals, rate
// limits, timeouts) runs on the monotonic clock, so a step of the wall
// clock, backwards or forwards, changes nothing it decides. It fails on a
// call that reads or builds wall-clock time as a number (Unix, UnixNano,
// UnixMilli, UnixMicro, time.Unix…) or strips the monotonic reading
// (Round(0), Truncate(0)) in a non-test file of the library, outside the
// list above. The harness, the commands (every cmd directory, an
// integration's load generators included) and the demo are not the library.
func TestMonotonicOnly(t *testing.T) {
	skip := []string{"bench", "cmd", "analysis", "docs", "scripts", ".ci"}
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			for _, s := range skip {
				if path == s || strings.HasPrefix(path, s+"/") || d.Name() == "testdata" || d.Name() == "cmd" {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				name := sel.Sel.Name
				bad := false
				switch name {
				case "Unix", "UnixNano", "UnixMilli", "UnixMicro":
					bad = true
				case "Round", "Truncate":
					if len(call.Args) == 1 {
						if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == "0" {
							bad = true
						}
					}
				}
				if !bad {
					return true
				}
				key := filepath.ToSlash(path) + ":" + fn.Name.Name
				if _, ok := wallClockAllowed[key]; !ok {
					found = append(found, fset.Position(call.Pos()).String()+" ("+fn.Name.Name+"): "+name)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("wall-clock time in the library: %s", f)
	}
}

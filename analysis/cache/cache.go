// Package cache defines an analyzer that finds caches and buffer pools on
// request paths: memory that requests share and compete for, which moirai
// accounts with a Memory (Use when an entry comes in, Evict when one
// pushes another out, MissBegin/MissEnd around the work a miss costs).
//
// # Heuristic
//
// Two shapes are reported, one diagnostic per cache or pool:
//
//   - a value of a known cache library's type (hashicorp/golang-lru and
//     its simplelru, arc and expirable packages, groupcache/lru,
//     k8s.io/utils/lru, ristretto, bigcache, freecache, go-cache, ccache)
//     whose methods are called on a request path, on shared storage;
//   - a look-alike: a struct type of the package with a map field and
//     either a container/list field or a capacity-like integer field
//     (named cap, capacity, max…, limit, size, budget), one of whose
//     methods deletes from the map and, in the same method, uses the list
//     or the capacity (an eviction), and one of whose methods runs on a
//     request path. A buffer pool of pages (a database's) is such a
//     look-alike.
//
// A sync.Pool is deliberately not reported: its Get never waits, a miss
// allocates, and the memory is the collector's, so requests do not
// contend on it; a bounded free list of buffers whose Get waits is a
// semaphore (see the semaphore analyzer).
//
// # Known false positives and negatives
//
// A registry (a map of sessions with a size limit) that refuses new
// entries rather than evicting reads as a cache when it deletes and
// checks its limit in one method. Caches without a map (a slice ring), or
// whose eviction is in a helper of another type, are missed; so is the
// garbage-collected heap itself, which no single value stands for (see
// docs/VET.md's recall table).
//
// # Fixes
//
// None: what a unit of memory is (bytes, pages, entries) is the
// program's choice.
package cache

import (
	"fmt"
	"go/ast"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// Analyzer reports caches and buffer pools on request paths.
var Analyzer = &analysis.Analyzer{
	Name: "cache",
	Doc:  "find LRU caches (libraries and look-alikes) and sync.Pool buffer pools on request paths: candidates for moirai.Memory accounting",
	URL:  "https://pkg.go.dev/github.com/moirai-go/moirai/analysis/cache",
	Run:  run,
}

// libraries are the import path prefixes of known cache libraries.
var libraries = []string{
	"github.com/hashicorp/golang-lru",
	"github.com/golang/groupcache/lru",
	"k8s.io/utils/lru",
	"github.com/dgraph-io/ristretto",
	"github.com/allegro/bigcache",
	"github.com/coocood/freecache",
	"github.com/patrickmn/go-cache",
	"github.com/karlseguin/ccache",
}

const suggestion = "account for its memory with a *moirai.Memory (ctl.Memory(%q, capacity); Use(ctx, n) when an entry comes in, Evict(ctx, n) when it pushes others out, MissBegin(ctx)/MissEnd(ctx) around a miss) so that the tasks that fill it are charged"

func run(pass *analysis.Pass) (any, error) {
	funcs := scan.Collect(pass)
	reportLibraries(pass, funcs)
	reportLookalikes(pass, funcs)
	return nil, nil
}

func libraryType(t types.Type) (string, bool) {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return "", false
	}
	path := n.Obj().Pkg().Path()
	for _, l := range libraries {
		if strings.HasPrefix(path, l) {
			return path + "." + n.Obj().Name(), true
		}
	}
	return "", false
}

// reportLibraries reports library caches used on request paths.
func reportLibraries(pass *analysis.Pass, funcs *scan.Funcs) {
	seen := map[*types.Var]bool{}
	for _, fn := range funcs.All {
		if !fn.OnPath {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok {
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
			if !ok {
				return true
			}
			s := pass.TypesInfo.Selections[sel]
			if s == nil || s.Kind() != types.MethodVal {
				return true
			}
			w := scan.Where(pass.TypesInfo, fn, sel.X)
			if !w.Kind.Shared() || seen[w.Var] {
				return true
			}
			lib, ok := libraryType(s.Recv())
			if !ok {
				return true
			}
			msg := fmt.Sprintf("cache %s (%s, %s) is used on a request path in %s: "+suggestion, w.Name, lib, w.Kind, fn.Name(), w.Name)
			seen[w.Var] = true
			pass.Report(analysis.Diagnostic{Pos: call.Pos(), End: call.End(), Category: "cache", Message: msg})
			return true
		})
	}
}

var capName = regexp.MustCompile(`(?i)^(max|cap$|capacity|limit|size|budget|maxsize|maxentries|maxbytes)`)

// reportLookalikes reports the package's struct types shaped like an LRU
// cache.
func reportLookalikes(pass *analysis.Pass, funcs *scan.Funcs) {
	// Methods by receiver type name.
	methods := map[*types.TypeName][]*scan.Func{}
	for _, fn := range funcs.All {
		if fn.Obj == nil || fn.Sig.Recv() == nil {
			continue
		}
		t := fn.Sig.Recv().Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := types.Unalias(t).(*types.Named); ok {
			methods[n.Obj()] = append(methods[n.Obj()], fn)
		}
	}
	for _, f := range scan.Files(pass) {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			tn, _ := pass.TypesInfo.Defs[ts.Name].(*types.TypeName)
			if tn == nil {
				return false
			}
			st, ok := tn.Type().Underlying().(*types.Struct)
			if !ok {
				return false
			}
			var maps, order []*types.Var
			for i := range st.NumFields() {
				fv := st.Field(i)
				switch u := fv.Type().Underlying().(type) {
				case *types.Map:
					maps = append(maps, fv)
				case *types.Basic:
					if u.Info()&types.IsInteger != 0 && capName.MatchString(fv.Name()) {
						order = append(order, fv)
					}
				default:
					if scan.IsNamed(fv.Type(), "container/list", "List") {
						order = append([]*types.Var{fv}, order...) // the list names it best
					}
				}
			}
			if len(maps) == 0 || len(order) == 0 {
				return false
			}
			onPath, evict := false, ""
			for _, m := range methods[tn] {
				onPath = onPath || m.OnPath
				if evict == "" && evicts(pass, m, maps, order) {
					evict = m.Name()
				}
			}
			if !onPath || evict == "" {
				return false
			}
			pass.Report(analysis.Diagnostic{
				Pos: ts.Name.Pos(), End: ts.Name.End(), Category: "cache",
				Message: fmt.Sprintf("type %s looks like a cache (map %s, %s %s, evicts in %s) used on a request path: "+suggestion,
					tn.Name(), maps[0].Name(), kindOf(order[0]), order[0].Name(), evict, tn.Name()),
			})
			return false
		})
	}
}

func kindOf(v *types.Var) string {
	if scan.IsNamed(v.Type(), "container/list", "List") {
		return "list"
	}
	return "capacity"
}

// evicts reports whether method m deletes from one of maps and uses one
// of order (the list or the capacity).
func evicts(pass *analysis.Pass, m *scan.Func, maps, order []*types.Var) bool {
	deletes, uses := false, false
	is := func(e ast.Expr, vs []*types.Var) bool {
		sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok {
			return false
		}
		s := pass.TypesInfo.Selections[sel]
		if s == nil || s.Kind() != types.FieldVal {
			return false
		}
		for _, v := range vs {
			if s.Obj() == v {
				return true
			}
		}
		return false
	}
	ast.Inspect(m.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "delete" && len(n.Args) > 0 && is(n.Args[0], maps) {
				deletes = true
			}
		case *ast.SelectorExpr:
			if is(n, order) {
				uses = true
			}
		}
		return true
	})
	return deletes && uses
}

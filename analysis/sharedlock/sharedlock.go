// Package sharedlock defines an analyzer that finds the sync.Mutex and
// sync.RWMutex values worth replacing with moirai's instrumented Mutex and
// RWMutex: locks that more than one goroutine can reach, locked on a
// request path, and held across something slow.
//
// # Heuristic
//
// A Lock or RLock call is a candidate when all three hold:
//
//   - the mutex is shared: a package-level variable, a struct field (of
//     anything but a local struct value), a local variable a function
//     literal captures, or a *sync.Mutex parameter (see scan.Where);
//   - the locking function is on a request path (see scan's package
//     documentation): exported, taking a context or an *http.Request, a
//     goroutine body, or called from one of those in the package;
//   - the critical section is long enough to make others wait: from the
//     Lock to the matching Unlock at the same level (or, after a deferred
//     Unlock, to the end of the function) it waits, does I/O, takes another
//     lock, calls a function value (a callback whose cost is unknown),
//     runs a loop whose trip count is not a constant, or passes a function
//     literal to a call (an iteration such as a B-tree's Ascend, which
//     calls it per item); or the lock is not
//     released in the function at all (a lock handed to the caller, as a
//     transaction's).
//
// One diagnostic is reported per mutex (per struct field, not per value of
// the struct), at the lock site with the strongest reason, with the other
// sites as related information.
//
// # Known false positives and negatives
//
// A loop over a collection that is always small, and a callback that is
// always cheap, make a section look long (false positives). Locks taken
// through an interface (sync.Locker), mutexes passed by value (a vet
// error anyway), a lock taken in one function and released in another
// whose section is short, and request paths that go through interface
// calls are missed (false negatives). Locks in test files and generated
// files are never reported.
//
// # Fixes
//
// None: moirai's Lock takes a context and returns an error, and the
// mutex needs a Controller to be built, so the rewrite is not mechanical.
package sharedlock

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/blocking"
	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// Analyzer reports shared locks held across slow work on request paths.
var Analyzer = blocking.NewAnalyzer("sharedlock",
	"find shared sync.Mutex and sync.RWMutex locks held across slow work on request paths: candidates for moirai.Mutex and moirai.RWMutex",
	run)

// site is one Lock or RLock call of a shared mutex.
type site struct {
	call    *ast.CallExpr
	fn      *scan.Func
	where   scan.Storage
	rw      bool   // a sync.RWMutex
	rank    int    // strength of the reason: lower is stronger
	because string // why the section is long, "" if it is not
}

func run(pass *analysis.Pass, blk *blocking.Result, funcs *scan.Funcs) {
	byVar := map[*types.Var][]*site{}
	var order []*types.Var
	for _, fn := range funcs.All {
		if !fn.OnPath {
			continue
		}
		forEachStmt(fn.Body.List, nil, func(st ast.Stmt, stack []frame) {
			s := lockSite(pass, fn, st)
			if s == nil {
				return
			}
			s.rank, s.because = weigh(pass, blk, fn, s, stack)
			if s.because == "" {
				return
			}
			if byVar[s.where.Var] == nil {
				order = append(order, s.where.Var)
			}
			byVar[s.where.Var] = append(byVar[s.where.Var], s)
		})
	}
	for _, v := range order {
		sites := byVar[v]
		sort.SliceStable(sites, func(i, j int) bool {
			if sites[i].rank != sites[j].rank {
				return sites[i].rank < sites[j].rank
			}
			return sites[i].call.Pos() < sites[j].call.Pos()
		})
		best := sites[0]
		kind, ctor, calls := "sync.Mutex", "Mutex", "Lock(ctx) … Unlock()"
		if best.rw {
			kind, ctor, calls = "sync.RWMutex", "RWMutex", "Lock(ctx) … Unlock(), RLock(ctx) … RUnlock(ctx)"
		}
		msg := fmt.Sprintf("%s %s (%s) is locked on a request path in %s and held across %s: make it a *moirai.%s (ctl.%s(%q); %s) so that its waits and holds are charged to tasks",
			kind, best.where.Name, best.where.Kind, best.fn.Name(), best.because, ctor, ctor, best.where.Name, calls)
		if n := len(sites) - 1; n > 0 {
			msg += fmt.Sprintf(" (%d more lock site%s)", n, plural(n))
		}
		d := analysis.Diagnostic{Pos: best.call.Pos(), End: best.call.End(), Category: "sharedlock", Message: msg}
		for _, s := range sites[1:] {
			d.Related = append(d.Related, analysis.RelatedInformation{Pos: s.call.Pos(), End: s.call.End(), Message: "also locked here, held across " + s.because})
		}
		pass.Report(d)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// frame is a statement list being walked and the index in it.
type frame struct {
	list []ast.Stmt
	i    int
}

// forEachStmt calls f on every statement of list and of the statements
// nested in it (not in function literals), with the frames of the lists
// that contain it, innermost last.
func forEachStmt(list []ast.Stmt, stack []frame, f func(ast.Stmt, []frame)) {
	for i, st := range list {
		stack := append(stack, frame{list, i})
		f(st, stack)
		for _, inner := range nested(st) {
			forEachStmt(inner, stack, f)
		}
	}
}

// nested returns the statement lists directly inside st.
func nested(st ast.Stmt) [][]ast.Stmt {
	switch st := st.(type) {
	case *ast.BlockStmt:
		return [][]ast.Stmt{st.List}
	case *ast.LabeledStmt:
		return nested(st.Stmt)
	case *ast.IfStmt:
		l := [][]ast.Stmt{st.Body.List}
		if st.Else != nil {
			l = append(l, []ast.Stmt{st.Else})
		}
		return l
	case *ast.ForStmt:
		return [][]ast.Stmt{st.Body.List}
	case *ast.RangeStmt:
		return [][]ast.Stmt{st.Body.List}
	case *ast.SwitchStmt:
		return clauses(st.Body)
	case *ast.TypeSwitchStmt:
		return clauses(st.Body)
	case *ast.SelectStmt:
		return clauses(st.Body)
	}
	return nil
}

func clauses(body *ast.BlockStmt) [][]ast.Stmt {
	var l [][]ast.Stmt
	for _, c := range body.List {
		switch c := c.(type) {
		case *ast.CaseClause:
			l = append(l, c.Body)
		case *ast.CommClause:
			l = append(l, c.Body)
		}
	}
	return l
}

// lockMethods are the calls that take a lock, by full name; true for a
// sync.RWMutex.
var lockMethods = map[string]bool{
	"(*sync.Mutex).Lock":    false,
	"(*sync.RWMutex).Lock":  true,
	"(*sync.RWMutex).RLock": true,
}

var unlockMethods = map[string]bool{
	"(*sync.Mutex).Unlock":    true,
	"(*sync.RWMutex).Unlock":  true,
	"(*sync.RWMutex).RUnlock": true,
}

// lockSite returns st as a lock site of a shared mutex, or nil.
func lockSite(pass *analysis.Pass, fn *scan.Func, st ast.Stmt) *site {
	call, recv, name := methodCall(pass, st)
	rw, ok := lockMethods[name]
	if !ok {
		return nil
	}
	where := scan.Where(pass.TypesInfo, fn, recv)
	if v, n, ok := scan.EmbeddedField(pass.TypesInfo, call.Fun.(*ast.SelectorExpr)); ok {
		base := where
		where = scan.Storage{Var: v, Kind: scan.Field, Name: n}
		if base.Kind == scan.Local && !scan.Is[*types.Pointer](pass.TypesInfo.TypeOf(recv)) {
			where.Kind = scan.Local
		}
	}
	if !where.Kind.Shared() || where.Var == nil {
		return nil
	}
	return &site{call: call, fn: fn, where: where, rw: rw}
}

// methodCall returns the call, receiver expression and callee's full name
// of an expression statement (or deferred call) that calls a method.
func methodCall(pass *analysis.Pass, st ast.Stmt) (*ast.CallExpr, ast.Expr, string) {
	var call *ast.CallExpr
	switch st := st.(type) {
	case *ast.ExprStmt:
		call, _ = st.X.(*ast.CallExpr)
	case *ast.DeferStmt:
		call = st.Call
		// defer func() { mu.Unlock() }()
		if lit, ok := call.Fun.(*ast.FuncLit); ok && len(lit.Body.List) == 1 {
			return methodCall(pass, lit.Body.List[0])
		}
	}
	if call == nil {
		return nil, nil, ""
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil, nil, ""
	}
	fn := scan.Callee(pass.TypesInfo, call)
	if fn == nil {
		return nil, nil, ""
	}
	return call, sel.X, fn.FullName()
}

// isUnlockOf reports whether st unlocks the receiver written recv.
func isUnlockOf(pass *analysis.Pass, st ast.Stmt, recv string) bool {
	_, r, name := methodCall(pass, st)
	return unlockMethods[name] && types.ExprString(r) == recv
}

// Reasons a section is long, strongest first.
const (
	rankHeld = iota
	rankWait
	rankIO
	rankLock
	rankCallback
	rankLoop
)

// weigh returns why the critical section of s is long, or "".
func weigh(pass *analysis.Pass, blk *blocking.Result, fn *scan.Func, s *site, stack []frame) (int, string) {
	recv := types.ExprString(s.call.Fun.(*ast.SelectorExpr).X)
	top := stack[len(stack)-1]
	rest := top.list[top.i+1:]
	var section []ast.Stmt
	outer := func() {
		for k := len(stack) - 2; k >= 0; k-- {
			f := stack[k]
			section = append(section, f.list[f.i+1:]...)
		}
	}
	deferred := false
	for _, st := range rest {
		deferred = deferred || isDeferUnlockOf(pass, st, recv)
	}
	switch {
	case deferred:
		section = append(section, rest...)
		outer()
	default:
		end := -1
		for j, st := range rest {
			if isUnlockOf(pass, st, recv) {
				end = j
				break
			}
		}
		if end >= 0 {
			section = rest[:end]
			break
		}
		section = rest
		if !unlockedAnywhere(pass, fn.Body, recv, s.call.End()) {
			return rankHeld, "the function's return (it is released elsewhere)"
		}
	}
	best, because := -1, ""
	note := func(rank int, why string) {
		if best < 0 || rank < best {
			best, because = rank, why
		}
	}
	for _, st := range section {
		if op, what := blk.May(st, blocking.Wait); op != 0 {
			note(rankWait, "a wait ("+what+")")
		}
		if op, what := blk.May(st, blocking.IO); op != 0 {
			note(rankIO, "I/O ("+what+")")
		}
		if op, what := blk.May(st, blocking.Lock); op != 0 && !strings.Contains(what, recv) {
			note(rankLock, "another lock's acquisition ("+what+")")
		}
		ast.Inspect(st, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit, *ast.GoStmt:
				return false
			case *ast.CallExpr:
				if scan.IsFuncValueCall(pass.TypesInfo, n) {
					note(rankCallback, "a call of the function value "+types.ExprString(n.Fun))
				}
				for _, a := range n.Args {
					if _, ok := a.(*ast.FuncLit); ok {
						note(rankLoop, "an iteration through a callback ("+types.ExprString(n.Fun)+")")
					}
				}
			case *ast.ForStmt, *ast.RangeStmt:
				if long(pass.TypesInfo, n.(ast.Stmt)) {
					note(rankLoop, "a loop")
				}
			}
			return true
		})
	}
	if best < 0 {
		return 0, ""
	}
	return best, because
}

func isDeferUnlockOf(pass *analysis.Pass, st ast.Stmt, recv string) bool {
	if _, ok := st.(*ast.DeferStmt); !ok {
		return false
	}
	return isUnlockOf(pass, st, recv)
}

// unlockedAnywhere reports whether body unlocks recv after pos,
// deferred or not, outside function literals but for deferred ones.
func unlockedAnywhere(pass *analysis.Pass, body *ast.BlockStmt, recv string, pos token.Pos) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if found {
			return false
		}
		st, ok := n.(ast.Stmt)
		if !ok {
			return true
		}
		if (st.Pos() >= pos || isDefer(st)) && isUnlockOf(pass, st, recv) {
			found = true
		}
		return true
	})
	return found
}

func isDefer(st ast.Stmt) bool { _, ok := st.(*ast.DeferStmt); return ok }

// long reports whether a loop's trip count is not a constant: a range
// over anything but an array or a constant, a for without a condition or
// whose condition compares with a non-constant.
func long(info *types.Info, loop ast.Stmt) bool {
	switch loop := loop.(type) {
	case *ast.RangeStmt:
		if loop.X == nil {
			return false
		}
		if tv, ok := info.Types[loop.X]; ok && tv.Value != nil {
			return false
		}
		t := info.TypeOf(loop.X)
		if t == nil {
			return true
		}
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		_, isArray := t.Underlying().(*types.Array)
		return !isArray
	case *ast.ForStmt:
		if loop.Cond == nil {
			return true
		}
		if be, ok := loop.Cond.(*ast.BinaryExpr); ok {
			if isConst(info, be.X) || isConst(info, be.Y) {
				return false
			}
		}
		return true
	}
	return false
}

func isConst(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Value != nil && tv.Value.Kind() != constant.Unknown
}

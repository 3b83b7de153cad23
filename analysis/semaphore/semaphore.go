// Package semaphore defines an analyzer that finds counting semaphores and
// worker pools, the bounded resources moirai models as a Semaphore (units
// held by a task) and a Queue (worker slots with a line in front).
//
// # Heuristic
//
// Four shapes are reported, one diagnostic per channel or semaphore:
//
//   - a buffered channel used as a counting semaphore: a function sends
//     to the channel and later receives from it (directly, deferred, or in
//     a goroutine it starts), and the channel is shared: a struct field, a
//     package-level variable, or a variable captured by a function literal
//     that sends (a handler built by a constructor). A channel made without
//     a capacity is a hand-off, not a semaphore, and is not reported;
//   - a buffered channel used as a pool of tokens, the other way round: a
//     struct field or package-level channel filled up front with as many
//     tokens as it holds (a send in a loop bounded by its capacity: the
//     argument of its make, or cap(ch)), from which a function on a
//     request path receives (takes a token) while another function sends
//     (gives it back), as Prometheus's query slots do;
//   - a golang.org/x/sync/semaphore.Weighted acquired on shared storage;
//   - a worker pool: go statements started in a loop whose goroutines
//     receive from one shared channel (range over it, or receive in a
//     loop), or an errgroup.Group with SetLimit.
//
// # Known false positives and negatives
//
// A channel a function both fills and drains as a queue (send, then
// receive the same item back) reads as a semaphore. A local semaphore
// that bounds the goroutines of one call is deliberately not reported:
// requests do not contend on it. Semaphores acquired in one method and
// released in another are found only when one function does both (or
// starts the goroutine that does). Pools built by libraries (ants,
// tunny) are missed.
//
// # Fixes
//
// None: moirai's Acquire takes a context and returns a Permit to release,
// and the semaphore needs a Controller to be built.
package semaphore

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// Analyzer reports counting semaphores and worker pools.
var Analyzer = &analysis.Analyzer{
	Name: "semaphore",
	Doc:  "find buffered channels used as counting semaphores, x/sync semaphores and worker pools: candidates for moirai.Semaphore and moirai.Queue",
	URL:  "https://pkg.go.dev/github.com/moirai-go/moirai/analysis/semaphore",
	Run:  run,
}

// chanUse is what the package does with one channel variable.
type chanUse struct {
	where  scan.Storage
	sends  []*ast.SendStmt
	sendFn []*scan.Func
	cap    ast.Expr // the capacity of its make, if found
	made   bool     // a make was found
}

func run(pass *analysis.Pass) (any, error) {
	funcs := scan.Collect(pass)
	chans := map[*types.Var]*chanUse{}
	var order []*types.Var
	use := func(w scan.Storage) *chanUse {
		u := chans[w.Var]
		if u == nil {
			u = &chanUse{where: w}
			chans[w.Var] = u
			order = append(order, w.Var)
		}
		if strings.Contains(w.Name, ".") && !strings.Contains(u.where.Name, ".") {
			u.where = w // a field named with its struct: "Server.tokens"
		}
		return u
	}
	// Sends and makes, by channel variable.
	for _, fn := range funcs.All {
		inspect(fn.Body, func(n ast.Node) {
			switch n := n.(type) {
			case *ast.SendStmt:
				if w := scan.Where(pass.TypesInfo, fn, n.Chan); w.Var != nil {
					u := use(w)
					u.sends = append(u.sends, n)
					u.sendFn = append(u.sendFn, fn)
				}
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if i < len(n.Lhs) {
						noteMake(pass, fn, n.Lhs[i], rhs, use)
					}
				}
			case *ast.ValueSpec:
				for i, v := range n.Values {
					if i < len(n.Names) {
						noteMake(pass, fn, n.Names[i], v, use)
					}
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok {
					if v, ok := pass.TypesInfo.Uses[id].(*types.Var); ok && v.IsField() {
						if c, ok := makeChan(pass, n.Value); ok {
							u := use(scan.Storage{Var: v, Kind: scan.Field, Name: v.Name()})
							u.made, u.cap = true, c
						}
					}
				}
			}
		})
	}
	semaphores := reportSemaphores(pass, funcs, chans, order)
	reportTokenPools(pass, funcs, chans, order, semaphores)
	reportWeighted(pass, funcs)
	reportPools(pass, funcs)
	return nil, nil
}

// reportSemaphores reports the buffered channels used as counting
// semaphores (a send acquires, a later receive releases) and returns
// them.
func reportSemaphores(pass *analysis.Pass, funcs *scan.Funcs, chans map[*types.Var]*chanUse, order []*types.Var) map[*types.Var]bool {
	semaphores := map[*types.Var]bool{}
	for _, v := range order {
		u := chans[v]
		if u.made && u.cap == nil {
			continue // unbuffered: a hand-off
		}
		for i, send := range u.sends {
			fn := u.sendFn[i]
			if !fn.OnPath || !sharedFor(u.where, fn) {
				continue
			}
			if !receivesAfter(pass, fn, v, send.End(), funcs) {
				continue
			}
			size := "its capacity"
			if u.cap != nil {
				size = types.ExprString(u.cap)
			}
			pass.Report(analysis.Diagnostic{
				Pos: send.Pos(), End: send.End(), Category: "semaphore",
				Message: fmt.Sprintf("buffered channel %s (%s) is a counting semaphore (a send acquires in %s, a receive releases): make it a *moirai.Semaphore (ctl.Semaphore(%q, %s); Acquire(ctx, 1) … Permit.Release()) so that waits for a unit are charged to tasks",
					u.where.Name, u.where.Kind, fn.Name(), u.where.Name, size),
			})
			semaphores[v] = true
			break
		}
	}
	return semaphores
}

// inspect visits the nodes of body, not those of function literals.
func inspect(body *ast.BlockStmt, f func(ast.Node)) {
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if n != nil {
			f(n)
		}
		return true
	})
}

func noteMake(pass *analysis.Pass, fn *scan.Func, lhs, rhs ast.Expr, use func(scan.Storage) *chanUse) {
	c, ok := makeChan(pass, rhs)
	if !ok {
		return
	}
	if w := scan.Where(pass.TypesInfo, fn, lhs); w.Var != nil {
		u := use(w)
		u.made, u.cap = true, c
	}
}

// makeChan reports whether e is make(chan T[, n]), and returns n.
func makeChan(pass *analysis.Pass, e ast.Expr) (ast.Expr, bool) {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return nil, false
	}
	if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "make" {
		return nil, false
	}
	if _, ok := pass.TypesInfo.TypeOf(call.Args[0]).Underlying().(*types.Chan); !ok {
		return nil, false
	}
	if len(call.Args) < 2 {
		return nil, true
	}
	if tv, ok := pass.TypesInfo.Types[call.Args[1]]; ok && tv.Value != nil && tv.Value.String() == "0" {
		return nil, true
	}
	return call.Args[1], true
}

// sharedFor reports whether a channel stored at w is shared between
// requests as seen from the sending function fn: a captured variable
// counts only when fn is a literal that captures it (a handler), not when
// fn declares it (a per-call limit).
func sharedFor(w scan.Storage, fn *scan.Func) bool {
	switch w.Kind {
	case scan.Global, scan.Field:
		return true
	case scan.Captured:
		return fn.Obj == nil && (w.Var.Pos() < fn.Node.Pos() || w.Var.Pos() >= fn.Node.End())
	}
	return false
}

// receivesAfter reports whether fn (with the literals inside it) receives
// from channel v after pos.
func receivesAfter(pass *analysis.Pass, fn *scan.Func, v *types.Var, pos token.Pos, funcs *scan.Funcs) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if found {
			return false
		}
		inner := fn
		if lit, ok := n.(*ast.FuncLit); ok {
			if g := funcs.ByNode[lit]; g != nil {
				inner = g
			}
			if receivesAfter(pass, inner, v, pos, funcs) {
				found = true
			}
			return false
		}
		var ch ast.Expr
		switch n := n.(type) {
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				ch = n.X
			}
		case *ast.RangeStmt:
			ch = n.X
		}
		if ch != nil && n.Pos() > pos {
			if w := scan.Where(pass.TypesInfo, inner, ch); w.Var == v {
				found = true
			}
		}
		return true
	})
	return found
}

// reportWeighted reports x/sync semaphores acquired on shared storage.
func reportWeighted(pass *analysis.Pass, funcs *scan.Funcs) {
	seen := map[*types.Var]bool{}
	for _, fn := range funcs.All {
		if !fn.OnPath {
			continue
		}
		inspect(fn.Body, func(n ast.Node) {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return
			}
			callee := scan.Callee(pass.TypesInfo, call)
			if callee == nil {
				return
			}
			switch callee.FullName() {
			case "(*golang.org/x/sync/semaphore.Weighted).Acquire", "(*golang.org/x/sync/semaphore.Weighted).TryAcquire":
			default:
				return
			}
			w := scan.Where(pass.TypesInfo, fn, call.Fun.(*ast.SelectorExpr).X)
			if !sharedFor(w, fn) && w.Kind != scan.PtrParam || seen[w.Var] {
				return
			}
			seen[w.Var] = true
			pass.Report(analysis.Diagnostic{
				Pos: call.Pos(), End: call.End(), Category: "semaphore",
				Message: fmt.Sprintf("semaphore.Weighted %s (%s) is acquired on a request path in %s: make it a *moirai.Semaphore (ctl.Semaphore(%q, size); Acquire(ctx, n) … Permit.Release()) so that waits for units are charged to tasks",
					w.Name, w.Kind, fn.Name(), w.Name),
			})
		})
	}
}

// reportPools reports worker pools: goroutines started in a loop that
// receive from one shared channel, and errgroups with a limit.
func reportPools(pass *analysis.Pass, funcs *scan.Funcs) {
	seen := map[*types.Var]bool{}
	for _, fn := range funcs.All {
		var loops []ast.Node
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case nil:
				return true
			case *ast.FuncLit:
				return false
			case *ast.ForStmt, *ast.RangeStmt:
				loops = append(loops, n)
			case *ast.GoStmt:
				if !insideAny(n, loops) {
					return true
				}
				body, worker := goBody(pass, n, funcs)
				if body == nil {
					return true
				}
				if w, ok := consumes(pass, worker, body); ok && !seen[w.Var] {
					seen[w.Var] = true
					pass.Report(analysis.Diagnostic{
						Pos: n.Pos(), End: n.End(), Category: "semaphore",
						Message: fmt.Sprintf("goroutines started in a loop in %s consume channel %s: a worker pool; make its workers the slots of a *moirai.Queue (ctl.Queue(%q, workers, backlog); Enter(ctx) or Do(ctx, fn)) so that waits for a worker are charged to tasks",
							fn.Name(), w.Name, w.Name),
					})
				}
			case *ast.CallExpr:
				if c := scan.Callee(pass.TypesInfo, n); c != nil && c.FullName() == "(*golang.org/x/sync/errgroup.Group).SetLimit" {
					pass.Report(analysis.Diagnostic{
						Pos: n.Pos(), End: n.End(), Category: "semaphore",
						Message: fmt.Sprintf("errgroup with a limit in %s: a worker pool; make its limit the slots of a *moirai.Queue (ctl.Queue(name, %s, backlog); Do(ctx, fn)) so that waits for a slot are charged to tasks",
							fn.Name(), types.ExprString(n.Args[0])),
					})
				}
			}
			return true
		})
	}
}

func insideAny(n ast.Node, loops []ast.Node) bool {
	for _, l := range loops {
		if n.Pos() >= l.Pos() && n.End() <= l.End() {
			return true
		}
	}
	return false
}

// goBody returns the body a go statement runs, and its function.
func goBody(pass *analysis.Pass, g *ast.GoStmt, funcs *scan.Funcs) (*ast.BlockStmt, *scan.Func) {
	if lit, ok := ast.Unparen(g.Call.Fun).(*ast.FuncLit); ok {
		if f := funcs.ByNode[lit]; f != nil {
			return lit.Body, f
		}
		return nil, nil
	}
	if c := scan.Callee(pass.TypesInfo, g.Call); c != nil {
		if f := funcs.ByObj[c]; f != nil {
			return f.Body, f
		}
	}
	return nil, nil
}

// consumes reports whether body loops receiving from a shared channel.
func consumes(pass *analysis.Pass, fn *scan.Func, body *ast.BlockStmt) (scan.Storage, bool) {
	var got scan.Storage
	ast.Inspect(body, func(n ast.Node) bool {
		if got.Var != nil {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.RangeStmt:
			if _, ok := pass.TypesInfo.TypeOf(n.X).Underlying().(*types.Chan); ok {
				if w := scan.Where(pass.TypesInfo, fn, n.X); w.Kind.Shared() {
					got = w
				}
			}
		case *ast.ForStmt:
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if u, ok := m.(*ast.UnaryExpr); ok && u.Op == token.ARROW && got.Var == nil {
					if w := scan.Where(pass.TypesInfo, fn, u.X); w.Kind.Shared() && !isSignal(pass.TypesInfo.TypeOf(u.X)) {
						if _, isCall := ast.Unparen(u.X).(*ast.CallExpr); !isCall {
							got = w
						}
					}
				}
				return true
			})
		}
		return true
	})
	return got, got.Var != nil
}

// isSignal reports whether t is a channel of struct{}: a stop or done
// signal, not work.
func isSignal(t types.Type) bool {
	c, ok := t.Underlying().(*types.Chan)
	if !ok {
		return false
	}
	st, ok := c.Elem().Underlying().(*types.Struct)
	return ok && st.NumFields() == 0
}

package waitloop

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/blocking"
	"github.com/moirai-go/moirai/analysis/internal/scan"
)

func run(pass *analysis.Pass, blk *blocking.Result, funcs *scan.Funcs) {
	for _, fn := range funcs.All {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ForStmt:
				check(pass, blk, fn, n)
			}
			return true
		})
	}
}

func check(pass *analysis.Pass, blk *blocking.Result, fn *scan.Func, loop *ast.ForStmt) {
	wait := waitIn(blk, loop.Body)
	if wait == "" {
		return
	}
	if work := workIn(pass, blk, loop.Body); work != "" {
		return
	}
	state := ""
	if loop.Cond != nil {
		state = sharedIn(pass, fn, loop.Cond)
	}
	for _, st := range loop.Body.List {
		if state != "" {
			break
		}
		switch st := st.(type) {
		case *ast.IfStmt:
			if leaves(st.Body) {
				state = sharedIn(pass, fn, st.Cond)
			}
		}
	}
	if state == "" {
		return
	}
	pass.Report(analysis.Diagnostic{
		Pos: loop.For, End: loop.Body.Lbrace, Category: "waitloop",
		Message: fmt.Sprintf("loop in %s waits (%s) until %s changes: a hand-made wait on a resource; mark it with a moirai resource (ctl.Register(name, moirai.KindLock, n)) calling WaitBegin(ctx) before the loop and WaitEnd(ctx) after it, or replace it with a moirai Mutex, Semaphore or Queue",
			fn.Name(), wait, state),
	})
}

// waitIn returns a waiting operation of body that must happen in an
// iteration (a top-level statement that must wait), or "".
func waitIn(blk *blocking.Result, body *ast.BlockStmt) string {
	for _, st := range body.List {
		if sel, ok := st.(*ast.SelectStmt); ok && !hasDefault(sel) {
			return "a select"
		}
		if op, what := blk.MustStmts([]ast.Stmt{st}); op&blocking.Wait != 0 {
			return what
		}
	}
	return ""
}

func hasDefault(sel *ast.SelectStmt) bool {
	for _, c := range sel.Body.List {
		if c.(*ast.CommClause).Comm == nil {
			return true
		}
	}
	return false
}

// quiet are the packages and functions whose calls are not work.
var quietPkgs = map[string]bool{
	"time": true, "context": true, "sync/atomic": true, "log": true, "log/slog": true,
	"fmt": true, "errors": true, "runtime": true,
}

// workIn returns a call statement of body that does work other than
// waiting, locking, atomics, time, context or logging, or "".
func workIn(pass *analysis.Pass, blk *blocking.Result, body *ast.BlockStmt) string {
	return first(body, func(n ast.Node) string {
		if st, ok := n.(*ast.ExprStmt); ok {
			if call, ok := st.X.(*ast.CallExpr); ok && !quietCall(pass, blk, call) {
				return types.ExprString(call.Fun)
			}
		}
		return ""
	})
}

// first returns the first non-empty f(m) over the nodes m of n in
// depth-first order, not looking into function literals, or "".
func first(n ast.Node, f func(ast.Node) string) string {
	found := ""
	ast.Inspect(n, func(m ast.Node) bool {
		if _, lit := m.(*ast.FuncLit); lit || found != "" {
			return false
		}
		found = f(m)
		return found == ""
	})
	return found
}

func quietCall(pass *analysis.Pass, blk *blocking.Result, call *ast.CallExpr) bool {
	if tv, ok := pass.TypesInfo.Types[call.Fun]; ok && (tv.IsBuiltin() || tv.IsType()) {
		return true
	}
	fn := scan.Callee(pass.TypesInfo, call)
	if fn == nil {
		fn = scan.Method(pass.TypesInfo, call)
	}
	if fn == nil || fn.Pkg() == nil {
		return false
	}
	if quietPkgs[fn.Pkg().Path()] || fn.Pkg().Path() == "sync" {
		return true
	}
	if must, _, _ := blk.Call(call); must&blocking.Wait != 0 {
		return true // a wrapper of a wait
	}
	return logging(fn)
}

// leaves reports whether a block ends in break or return.
func leaves(b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	switch st := b.List[len(b.List)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return st.Tok == token.BREAK || st.Tok == token.GOTO
	}
	return false
}

// sharedIn returns the name of shared state e reads, or "".
func sharedIn(pass *analysis.Pass, fn *scan.Func, e ast.Expr) string {
	if e == nil {
		return ""
	}
	return first(e, func(n ast.Node) string {
		switch n := n.(type) {
		case *ast.SelectorExpr, *ast.Ident:
			w := scan.Where(pass.TypesInfo, fn, n.(ast.Expr))
			if w.Kind.Shared() && !scan.Is[*types.Chan](w.Var.Type()) {
				return w.Name
			}
			if sel, ok := n.(*ast.SelectorExpr); ok {
				// A method of shared state: s.ready(), x.Load().
				if s := pass.TypesInfo.Selections[sel]; s != nil && s.Kind() == types.MethodVal {
					if w := scan.Where(pass.TypesInfo, fn, sel.X); w.Kind.Shared() {
						return w.Name + "." + sel.Sel.Name + "()"
					}
				}
			}
		}
		return ""
	})
}

package semaphore

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// reportTokenPools reports the buffered channels used as pools of tokens,
// the other way round from a counting semaphore: filled up front with as
// many tokens as the channel holds (a send in a loop bounded by its
// capacity), then a receive on a request path takes a token and a send
// elsewhere gives it back. Prometheus's query slots are one (a channel
// of the free slots' indices). semaphores are the channels already
// reported as counting semaphores.
func reportTokenPools(pass *analysis.Pass, funcs *scan.Funcs, chans map[*types.Var]*chanUse, order []*types.Var, semaphores map[*types.Var]bool) {
	for _, v := range order {
		u := chans[v]
		if semaphores[v] || !v.IsField() && u.where.Kind != scan.Global {
			continue
		}
		fill := -1
		for i, send := range u.sends {
			if fillsToCapacity(pass, u.sendFn[i], send, u.cap) {
				fill = i
				break
			}
		}
		if fill < 0 {
			continue
		}
		filler := u.sendFn[fill]
		givesBack := false
		for _, fn := range u.sendFn {
			givesBack = givesBack || fn != filler
		}
		if !givesBack {
			continue
		}
		fn, recv := takes(pass, funcs, v, filler)
		if recv == nil {
			continue
		}
		name, kind := u.where.Name, u.where.Kind.String()
		if f := fieldName(pass, u.sends[fill].Chan); f != "" {
			// A field of a value receiver is seen as local where it is
			// used; the channel is the struct's.
			name, kind = f, scan.Field.String()
		}
		pass.Report(analysis.Diagnostic{
			Pos: recv.Pos(), End: recv.End(), Category: "semaphore",
			Message: fmt.Sprintf("buffered channel %s (%s) is a pool of tokens (filled up front in %s; a receive takes one in %s, a send gives it back): make it a *moirai.Semaphore (ctl.Semaphore(%q, %s); Acquire(ctx, 1) … Permit.Release()) so that waits for a token are charged to tasks",
				name, kind, filler.Name(), fn.Name(), name, capString(u.cap)),
		})
	}
}

func capString(c ast.Expr) string {
	if c == nil {
		return "its capacity"
	}
	return types.ExprString(c)
}

// fillsToCapacity reports whether send is in a loop of fn bounded by the
// channel's capacity: a range over capacity or cap(ch), or a loop while
// i < capacity or cap(ch) (capacity is make's argument, nil if unknown).
func fillsToCapacity(pass *analysis.Pass, fn *scan.Func, send *ast.SendStmt, capacity ast.Expr) bool {
	bounded := func(e ast.Expr) bool {
		e = ast.Unparen(e)
		if call, ok := e.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "cap" && len(call.Args) == 1 {
				_, isBuiltin := pass.TypesInfo.Uses[id].(*types.Builtin)
				return isBuiltin
			}
		}
		return capacity != nil && types.ExprString(e) == types.ExprString(capacity)
	}
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if found || n == nil || n.Pos() > send.Pos() || n.End() < send.End() {
			return false // found, or a node the send is not in
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.RangeStmt:
			found = isInteger(pass, n.X) && bounded(n.X)
		case *ast.ForStmt:
			if c, ok := n.Cond.(*ast.BinaryExpr); ok && (c.Op == token.LSS || c.Op == token.LEQ) {
				found = bounded(c.Y)
			}
		}
		return true
	})
	return found
}

func isInteger(pass *analysis.Pass, e ast.Expr) bool {
	b, ok := pass.TypesInfo.TypeOf(e).Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}

// takes returns the first function on a request path, other than filler,
// that receives from channel v, and the receive.
func takes(pass *analysis.Pass, funcs *scan.Funcs, v *types.Var, filler *scan.Func) (*scan.Func, ast.Node) {
	for _, fn := range funcs.All {
		if !fn.OnPath || fn == filler {
			continue
		}
		var recv ast.Node
		inspect(fn.Body, func(n ast.Node) {
			if u, ok := n.(*ast.UnaryExpr); ok && u.Op == token.ARROW && recv == nil {
				if scan.Where(pass.TypesInfo, fn, u.X).Var == v {
					recv = u
				}
			}
		})
		if recv != nil {
			return fn, recv
		}
	}
	return nil, nil
}

// fieldName returns "Type.field" for a selector of a named struct's
// field, or "".
func fieldName(pass *analysis.Pass, e ast.Expr) string {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	selection := pass.TypesInfo.Selections[sel]
	if selection == nil || selection.Kind() != types.FieldVal {
		return ""
	}
	recv := selection.Recv()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := recv.(*types.Named)
	if !ok {
		return ""
	}
	return named.Obj().Name() + "." + sel.Sel.Name
}

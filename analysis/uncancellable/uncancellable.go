// Package uncancellable defines an analyzer that finds request work a
// cancellation cannot stop: loops that wait or do I/O on every iteration
// and never look at the request's context, and sleeps that ignore it.
// moirai acts on a task by cancelling its context; where the code never
// checks it, the cancellation does not take effect until the work ends by
// itself, and the resources it holds stay held.
//
// # Heuristic
//
// In a function on a request path (see scan's package documentation) with
// a context in scope (its own context.Context parameter, an enclosing
// function's, or an *http.Request's Context()):
//
//   - a for or range loop (not a range over a channel, which its closing
//     ends) whose body may wait or do I/O (see the blocking package) and
//     which never mentions the context: no ctx.Err(), no <-ctx.Done(), no
//     call passing ctx on. The outermost such loop is reported;
//   - a time.Sleep statement (outside a reported loop): it sleeps through
//     a cancellation.
//
// # Known false positives and negatives
//
// A loop whose iterations are few (three retries) is reported all the
// same. A loop that passes ctx to a callee that ignores it is taken as
// checked, and loops whose slow work is behind a function value or an
// interface call are missed.
//
// # Fixes
//
// Both are mechanical and offered as suggested fixes (applied only with
// -fix), when the function returns nothing or ends its results with an
// error and every other result has a zero value that can be written:
//
//   - at the start of the loop's body, a safe point:
//     if err := ctx.Err(); err != nil { return …, err };
//   - the sleep becomes a select on time.After(d) and ctx.Done() that
//     returns ctx.Err() when the context is done first.
package uncancellable

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/blocking"
	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// Analyzer reports request loops and sleeps that ignore their context.
var Analyzer = blocking.NewAnalyzer("uncancellable",
	"find request loops that wait or do I/O without checking their context, and sleeps that ignore it: a cancellation by moirai would not take effect there",
	run)

func run(pass *analysis.Pass, blk *blocking.Result, funcs *scan.Funcs) {
	for _, fn := range funcs.All {
		if !fn.OnPath {
			continue
		}
		ctx, ok := fn.Context()
		if !ok {
			continue
		}
		c := &checker{pass: pass, blk: blk, fn: fn, ctx: ctx, ctxVar: contextVar(pass, fn)}
		c.walk(fn.Body)
	}
}

type checker struct {
	pass   *analysis.Pass
	blk    *blocking.Result
	fn     *scan.Func
	ctx    string     // "ctx" or "r.Context()"
	ctxVar *types.Var // the context or request parameter
}

// contextVar returns the parameter fn.Context() names.
func contextVar(pass *analysis.Pass, fn *scan.Func) *types.Var {
	for g := fn; g != nil; g = g.Parent {
		params := g.Sig.Params()
		for i := range params.Len() {
			if scan.IsContext(params.At(i).Type()) && params.At(i).Name() != "_" {
				return params.At(i)
			}
		}
		for i := range params.Len() {
			if scan.IsNamed(params.At(i).Type(), "net/http", "Request") && params.At(i).Name() != "_" {
				return params.At(i)
			}
		}
	}
	return nil
}

func (c *checker) walk(n ast.Node) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ForStmt, *ast.RangeStmt:
			return !c.loop(n.(ast.Stmt))
		case *ast.ExprStmt:
			c.sleep(n)
		}
		return true
	})
}

// loop reports loop if it ignores the context, and says so.
func (c *checker) loop(loop ast.Stmt) bool {
	var body *ast.BlockStmt
	switch l := loop.(type) {
	case *ast.ForStmt:
		body = l.Body
	case *ast.RangeStmt:
		if _, ok := c.pass.TypesInfo.TypeOf(l.X).Underlying().(*types.Chan); ok {
			return false
		}
		body = l.Body
	}
	op, what := c.blk.May(body, blocking.Wait|blocking.IO)
	if op == 0 || c.mentionsContext(loop) {
		return false
	}
	does := "waits (" + what + ")"
	if op == blocking.IO {
		does = "does I/O (" + what + ")"
	}
	d := analysis.Diagnostic{
		Pos: loop.Pos(), End: body.Lbrace, Category: "uncancellable",
		Message: fmt.Sprintf("loop in %s %s on every iteration but never checks %s: a cancellation (moirai's or the client's) does not take effect until it ends; check %s.Err() in the loop",
			c.fn.Name(), does, c.ctx, c.ctx),
	}
	if ret, ok := c.returnStmt("err"); ok && len(body.List) > 0 {
		// Before the body's first statement, on its own lines, so that a
		// comment after the loop's brace stays where it is.
		first := body.List[0]
		indent := c.indent(first)
		text := fmt.Sprintf("if err := %s.Err(); err != nil {\n%s\t%s\n%s}\n%s", c.ctx, indent, ret, indent, indent)
		if !c.returnsError() {
			text = fmt.Sprintf("if %s.Err() != nil {\n%s\t%s\n%s}\n%s", c.ctx, indent, ret, indent, indent)
		}
		d.SuggestedFixes = []analysis.SuggestedFix{{
			Message:   "check " + c.ctx + ".Err() at the start of each iteration",
			TextEdits: []analysis.TextEdit{{Pos: first.Pos(), End: first.Pos(), NewText: []byte(text)}},
		}}
	}
	c.pass.Report(d)
	return true
}

// sleep reports a time.Sleep statement.
func (c *checker) sleep(st *ast.ExprStmt) {
	call, ok := st.X.(*ast.CallExpr)
	if !ok {
		return
	}
	fn := scan.Callee(c.pass.TypesInfo, call)
	if fn == nil || fn.FullName() != "time.Sleep" || len(call.Args) != 1 {
		return
	}
	d := analysis.Diagnostic{
		Pos: call.Pos(), End: call.End(), Category: "uncancellable",
		Message: fmt.Sprintf("time.Sleep in %s ignores %s: a cancellation (moirai's or the client's) waits for the sleep to end; select on time.After and %s.Done() instead",
			c.fn.Name(), c.ctx, c.ctx),
	}
	ret, ok := c.returnStmt(c.ctx + ".Err()")
	timePkg := c.timeName(st)
	if ok && timePkg != "" {
		indent := c.indent(st)
		text := fmt.Sprintf("select {\n%scase <-%s.After(%s):\n%scase <-%s.Done():\n%s\t%s\n%s}",
			indent, timePkg, types.ExprString(call.Args[0]), indent, c.ctx, indent, ret, indent)
		d.SuggestedFixes = []analysis.SuggestedFix{{
			Message:   "sleep in a select that returns when " + c.ctx + " is done",
			TextEdits: []analysis.TextEdit{{Pos: st.Pos(), End: st.End(), NewText: []byte(text)}},
		}}
	}
	c.pass.Report(d)
}

// timeName returns the name the time package has in the file of n ("time"
// unless renamed), or "" when it is not imported by name.
func (c *checker) timeName(n ast.Node) string {
	for _, imp := range c.fn.File.Imports {
		if strings.Trim(imp.Path.Value, `"`) != "time" {
			continue
		}
		if imp.Name == nil {
			return "time"
		}
		if imp.Name.Name == "_" || imp.Name.Name == "." {
			return ""
		}
		return imp.Name.Name
	}
	return ""
}

// mentionsContext reports whether n refers to the context (or the
// request whose context it is).
func (c *checker) mentionsContext(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(m ast.Node) bool {
		if found {
			return false
		}
		id, ok := m.(*ast.Ident)
		if !ok {
			return true
		}
		v, ok := c.pass.TypesInfo.Uses[id].(*types.Var)
		if !ok {
			return true
		}
		if v == c.ctxVar || scan.IsContext(v.Type()) {
			found = true
		}
		return true
	})
	return found
}

// returnsError reports whether the function's last result is an error.
func (c *checker) returnsError() bool { return c.fn.Sig.Results().Len() > 0 }

// returnStmt returns the statement a fix returns with, err being the
// error returned: "return", "return err" or "return 0, nil, err"; ok is
// false when no fix can be written.
func (c *checker) returnStmt(err string) (string, bool) {
	zeros, ok := scan.ZeroValues(c.fn.Sig, c.pass.Pkg)
	if !ok {
		return "", false
	}
	if c.fn.Sig.Results().Len() == 0 {
		return "return", true
	}
	return "return " + strings.Join(append(zeros, err), ", "), true
}

// indent returns the tabs before n's line in its file.
func (c *checker) indent(n ast.Node) string {
	pos := c.pass.Fset.Position(n.Pos())
	file := c.pass.Fset.File(n.Pos())
	if file == nil {
		return ""
	}
	src, err := c.pass.ReadFile(pos.Filename)
	if err != nil {
		return strings.Repeat("\t", pos.Column-1)
	}
	start := file.Offset(file.LineStart(pos.Line))
	end := start
	for end < len(src) && (src[end] == '\t' || src[end] == ' ') {
		end++
	}
	return string(src[start:end])
}

// Package scan holds what moirai's analyzers share: the functions of a
// package and which of them run on a request path, where a variable lives
// (and so whether other goroutines can reach it), the callee of a call, and
// the zero values a suggested fix returns.
//
// # Request paths
//
// A function is on a request path when concurrent requests (or other
// goroutines) can run it: it is an entry, or an entry of the same package
// calls or refers to it. Entries are exported functions and methods of a
// package other than main, functions with a [context.Context] or an
// [net/http.Request] parameter, the bodies of go statements, and function
// literals inside a function on a request path. This is a syntactic,
// package-local approximation: an unexported method called only through
// an interface is missed (a false negative), and an exported function no
// request ever calls is included (a false positive).
//
// # Storage
//
// [Where] classifies the variable an expression reads or locks: a
// package-level variable, a struct field, a local variable captured by a
// function literal, a pointer parameter, or a local. The first four are
// reachable from more than one goroutine; a local is not.
//
// Files whose name ends in _test.go and generated files (with the
// standard "// Code generated ... DO NOT EDIT." header) are never reported
// on: [Files] leaves them out.
package scan

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// Files returns the files of the pass worth reporting on: neither test
// files nor generated files.
func Files(pass *analysis.Pass) []*ast.File {
	var fs []*ast.File
	for _, f := range pass.Files {
		if ast.IsGenerated(f) {
			continue
		}
		name := pass.Fset.File(f.Pos()).Name()
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fs = append(fs, f)
	}
	return fs
}

// Func is a function of the package: a declaration or a literal.
type Func struct {
	Node   ast.Node       // *ast.FuncDecl or *ast.FuncLit
	Body   *ast.BlockStmt // never nil
	Sig    *types.Signature
	Obj    *types.Func // the declared function; nil for a literal
	Parent *Func       // the function a literal is in; nil for a declaration
	File   *ast.File

	OnPath bool   // on a request path
	Why    string // why it is on a request path, for messages

	funcs *Funcs
}

// Name is the function's name for messages: "get", "(*lru).get", or
// "func literal in buildTableLock".
func (f *Func) Name() string {
	if f.Obj != nil {
		if recv := f.Sig.Recv(); recv != nil {
			return "(" + types.TypeString(recv.Type(), func(*types.Package) string { return "" }) + ")." + f.Obj.Name()
		}
		return f.Obj.Name()
	}
	d := f
	for d.Parent != nil {
		d = d.Parent
	}
	return "a function literal in " + d.Name()
}

// Context returns the context.Context in scope in f: its own parameter,
// else one of an enclosing function's (a literal captures it). The
// expression is "ctx" (the parameter's name) or "r.Context()" for an HTTP
// handler's request. ok is false when there is none.
func (f *Func) Context() (expr string, ok bool) {
	for g := f; g != nil; g = g.Parent {
		params := g.Sig.Params()
		for i := range params.Len() {
			p := params.At(i)
			if IsContext(p.Type()) && p.Name() != "" && p.Name() != "_" {
				return p.Name(), true
			}
		}
		for i := range params.Len() {
			p := params.At(i)
			if isNamed(p.Type(), "net/http", "Request") && p.Name() != "" && p.Name() != "_" {
				return p.Name() + ".Context()", true
			}
		}
	}
	return "", false
}

// Funcs lists the functions of the package's files (see [Files]) and
// marks those on a request path.
type Funcs struct {
	All    []*Func
	ByNode map[ast.Node]*Func
	ByObj  map[*types.Func]*Func

	captured map[*types.Var]bool // locals some function literal refers to
}

// Collect builds the package's [Funcs].
func Collect(pass *analysis.Pass) *Funcs {
	fs := &Funcs{ByNode: map[ast.Node]*Func{}, ByObj: map[*types.Func]*Func{}, captured: map[*types.Var]bool{}}
	var walk func(n ast.Node, parent *Func, file *ast.File)
	walk = func(n ast.Node, parent *Func, file *ast.File) {
		ast.Inspect(n, func(m ast.Node) bool {
			var fn *Func
			switch m := m.(type) {
			case *ast.FuncDecl:
				if m.Body == nil {
					return false
				}
				obj, _ := pass.TypesInfo.Defs[m.Name].(*types.Func)
				if obj == nil {
					return false
				}
				fn = &Func{Node: m, Body: m.Body, Sig: obj.Type().(*types.Signature), Obj: obj, File: file}
				fs.ByObj[obj] = fn
			case *ast.FuncLit:
				sig, _ := pass.TypesInfo.TypeOf(m).(*types.Signature)
				if sig == nil {
					return false
				}
				fn = &Func{Node: m, Body: m.Body, Sig: sig, File: file, Parent: parent}
			default:
				return true
			}
			fn.funcs = fs
			fs.All = append(fs.All, fn)
			fs.ByNode[m] = fn
			walk(fn.Body, fn, file)
			return false
		})
	}
	for _, file := range Files(pass) {
		for _, d := range file.Decls {
			walk(d, nil, file)
		}
	}
	for _, f := range fs.All {
		if f.Obj != nil {
			continue
		}
		ast.Inspect(f.Body, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			v, ok := pass.TypesInfo.Uses[id].(*types.Var)
			if ok && !v.IsField() && (v.Pos() < f.Node.Pos() || v.Pos() >= f.Node.End()) && v.Parent() != pass.Pkg.Scope() {
				fs.captured[v] = true
			}
			return true
		})
	}
	fs.mark(pass)
	return fs
}

// mark sets OnPath and Why of every function: entries first, then what
// they call or refer to, to a fixed point.
func (fs *Funcs) mark(pass *analysis.Pass) {
	isMain := pass.Pkg.Name() == "main"
	var queue []*Func
	set := func(f *Func, why string) {
		if f.OnPath {
			return
		}
		f.OnPath, f.Why = true, why
		queue = append(queue, f)
	}
	// Goroutine bodies: go f(...) and go func() {...}().
	goBodies := map[ast.Node]bool{}
	goFuncs := map[*types.Func]bool{}
	for _, f := range fs.All {
		ast.Inspect(f.Body, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok && lit != nil {
				return false
			}
			g, ok := n.(*ast.GoStmt)
			if !ok {
				return true
			}
			if lit, ok := ast.Unparen(g.Call.Fun).(*ast.FuncLit); ok {
				goBodies[lit] = true
			} else if fn := Callee(pass.TypesInfo, g.Call); fn != nil {
				goFuncs[fn] = true
			}
			return true
		})
	}
	for _, f := range fs.All {
		switch {
		case f.Obj != nil && f.Obj.Exported() && !isMain:
			set(f, "exported")
		case hasRequestParam(f.Sig):
			set(f, "takes a request context")
		case goBodies[f.Node] || (f.Obj != nil && goFuncs[f.Obj]):
			set(f, "runs as a goroutine")
		}
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		// Literals inside f, and functions f calls or refers to.
		ast.Inspect(f.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				if g := fs.ByNode[n]; g != nil {
					set(g, "inside "+f.Name())
				}
				return false
			case *ast.Ident:
				if obj, ok := pass.TypesInfo.Uses[n].(*types.Func); ok {
					if g := fs.ByObj[obj.Origin()]; g != nil {
						set(g, "called from "+f.Name())
					}
				}
			case *ast.SelectorExpr:
				if sel := pass.TypesInfo.Selections[n]; sel != nil {
					if obj, ok := sel.Obj().(*types.Func); ok {
						if g := fs.ByObj[obj.Origin()]; g != nil {
							set(g, "called from "+f.Name())
						}
					}
				}
			}
			return true
		})
	}
}

// hasRequestParam reports whether sig takes a context.Context or an
// *http.Request.
func hasRequestParam(sig *types.Signature) bool {
	for i := range sig.Params().Len() {
		t := sig.Params().At(i).Type()
		if IsContext(t) || isNamed(t, "net/http", "Request") {
			return true
		}
	}
	return false
}

// IsContext reports whether t is context.Context.
func IsContext(t types.Type) bool { return isNamed(t, "context", "Context") }

// isNamed reports whether t, or what it points to, is the named type
// pkg.name.
func isNamed(t types.Type, pkg, name string) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Obj()
	return obj.Name() == name && obj.Pkg() != nil && obj.Pkg().Path() == pkg
}

// IsNamed reports whether t, or what it points to, is the named type
// pkg.name.
func IsNamed(t types.Type, pkg, name string) bool { return isNamed(t, pkg, name) }

// Callee returns the function or method a call statically calls (its
// generic origin), or nil: a call of a function value, an interface
// method, a builtin or a conversion.
func Callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(info, call).(*types.Func)
	if fn == nil {
		return nil
	}
	if sig, ok := fn.Type().(*types.Signature); ok && sig.Recv() != nil {
		if types.IsInterface(sig.Recv().Type()) {
			return nil
		}
	}
	return fn.Origin()
}

// Method returns the method a call calls, interface methods included, or
// nil.
func Method(info *types.Info, call *ast.CallExpr) *types.Func {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	s := info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return nil
	}
	fn, _ := s.Obj().(*types.Func)
	if fn == nil {
		return nil
	}
	return fn.Origin()
}

// IsFuncValueCall reports whether call calls a function value: a
// variable, parameter or field of function type (a callback), as opposed
// to a declared function, a method, a builtin or a conversion.
func IsFuncValueCall(info *types.Info, call *ast.CallExpr) bool {
	if tv, ok := info.Types[call.Fun]; ok && (tv.IsType() || tv.IsBuiltin()) {
		return false
	}
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		_, ok := info.Uses[fun].(*types.Var)
		return ok
	case *ast.SelectorExpr:
		if sel := info.Selections[fun]; sel != nil {
			return sel.Kind() == types.FieldVal
		}
	}
	return false
}

// Kind is where a variable lives.
type Kind int

// Kinds of storage, from the most to the least shared.
const (
	Unknown  Kind = iota // not a variable, or not resolved
	Global               // a package-level variable
	Field                // a struct field (of a value others can reach)
	Captured             // a local variable a function literal captures
	PtrParam             // a parameter of pointer type
	Local                // a local variable no literal captures
)

// Shared reports whether storage of kind k can be reached by more than
// one goroutine.
func (k Kind) Shared() bool { return k >= Global && k <= PtrParam }

func (k Kind) String() string {
	switch k {
	case Global:
		return "a package-level variable"
	case Field:
		return "a struct field"
	case Captured:
		return "a variable captured by a function literal"
	case PtrParam:
		return "a pointer parameter"
	case Local:
		return "a local variable"
	}
	return "unknown storage"
}

// Storage is the variable an expression denotes, and where it lives.
type Storage struct {
	Var  *types.Var // nil when Kind is Unknown
	Kind Kind
	Name string // for messages: "lru.mu", "tables", "table"
}

// Where classifies the variable e denotes, as seen from inside fn: x,
// x.f, x[i], *x, &x, (x) and the receiver of an implicit embedded field
// all resolve to the variable (or field) that holds the state.
func Where(info *types.Info, fn *Func, e ast.Expr) Storage {
	switch e := ast.Unparen(e).(type) {
	case *ast.StarExpr:
		return Where(info, fn, e.X)
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return Where(info, fn, e.X)
		}
	case *ast.IndexExpr:
		return Where(info, fn, e.X)
	case *ast.SliceExpr:
		return Where(info, fn, e.X)
	case *ast.SelectorExpr:
		sel := info.Selections[e]
		if sel == nil {
			// A qualified identifier: pkg.Var.
			if v, ok := info.Uses[e.Sel].(*types.Var); ok {
				return Storage{Var: v, Kind: Global, Name: e.Sel.Name}
			}
			return Storage{}
		}
		if sel.Kind() != types.FieldVal {
			return Storage{}
		}
		v := sel.Obj().(*types.Var)
		base := Where(info, fn, e.X)
		if base.Kind == Local && !Is[*types.Pointer](info.TypeOf(e.X)) {
			// A field of a local struct value: as local as its struct.
			return Storage{Var: v, Kind: Local, Name: base.Name + "." + v.Name()}
		}
		return Storage{Var: v, Kind: Field, Name: typeName(sel.Recv()) + "." + fieldPath(sel)}
	case *ast.Ident:
		v, ok := info.Uses[e].(*types.Var)
		if !ok {
			if v, ok = info.Defs[e].(*types.Var); !ok {
				return Storage{}
			}
		}
		return Storage{Var: v, Kind: classify(v, fn), Name: v.Name()}
	}
	return Storage{}
}

// classify says where variable v lives, as seen from fn.
func classify(v *types.Var, fn *Func) Kind {
	if v.IsField() {
		return Field
	}
	if v.Pkg() != nil && v.Parent() == v.Pkg().Scope() {
		return Global
	}
	if fn == nil {
		return Unknown
	}
	// Declared outside the innermost function: captured by a literal.
	if v.Pos() < fn.Node.Pos() || v.Pos() >= fn.Node.End() {
		return Captured
	}
	if fn.funcs != nil && fn.funcs.captured[v] {
		return Captured
	}
	if isParam(v, fn.Sig) && Is[*types.Pointer](v.Type()) {
		return PtrParam
	}
	return Local
}

func isParam(v *types.Var, sig *types.Signature) bool {
	for i := range sig.Params().Len() {
		if sig.Params().At(i) == v {
			return true
		}
	}
	return false
}

// Is reports whether t's underlying type is a T: Is[*types.Chan](t) for
// a channel. It is false for a nil t (an expression with no type).
func Is[T types.Type](t types.Type) bool {
	if t == nil {
		return false
	}
	_, ok := t.Underlying().(T)
	return ok
}

// typeName is the name of t or of what it points to, without package.
func typeName(t types.Type) string {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Obj().Name()
	}
	return "struct"
}

// fieldPath names the field a selection reaches, through embedded
// fields: "mu", or "inner.mu" when promoted.
func fieldPath(sel *types.Selection) string {
	idx := sel.Index()
	t := sel.Recv()
	var names []string
	for _, i := range idx {
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			break
		}
		f := st.Field(i)
		names = append(names, f.Name())
		t = f.Type()
	}
	if len(names) > 1 {
		return strings.Join(names, ".")
	}
	return sel.Obj().Name()
}

// EmbeddedField returns, for a method call x.M() promoted through
// embedded fields (x.Lock() where x embeds sync.Mutex), the innermost
// embedded field whose method is called, and its name "T.Mutex". ok is
// false when the method is not promoted.
func EmbeddedField(info *types.Info, sel *ast.SelectorExpr) (v *types.Var, name string, ok bool) {
	s := info.Selections[sel]
	if s == nil || len(s.Index()) < 2 {
		return nil, "", false
	}
	t := s.Recv()
	owner := typeName(t)
	var names []string
	for _, i := range s.Index()[:len(s.Index())-1] {
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			return nil, "", false
		}
		v = st.Field(i)
		names = append(names, v.Name())
		t = v.Type()
	}
	return v, owner + "." + strings.Join(names, "."), v != nil
}

// ZeroValues renders the zero values of a signature's results but the
// last (an error), for a return statement a fix inserts: ok is false when
// the results do not end in an error or a zero value cannot be written.
// With no results it returns "", true.
func ZeroValues(sig *types.Signature, pkg *types.Package) (vals []string, ok bool) {
	res := sig.Results()
	if res.Len() == 0 {
		return nil, true
	}
	last := res.At(res.Len() - 1).Type()
	if !types.Identical(last, types.Universe.Lookup("error").Type()) {
		return nil, false
	}
	qual := types.RelativeTo(pkg)
	for i := range res.Len() - 1 {
		t := res.At(i).Type()
		z, ok := zero(t, qual)
		if !ok {
			return nil, false
		}
		vals = append(vals, z)
	}
	return vals, true
}

func zero(t types.Type, qual types.Qualifier) (string, bool) {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsBoolean != 0:
			return "false", true
		case u.Info()&types.IsString != 0:
			return `""`, true
		case u.Info()&types.IsNumeric != 0:
			return "0", true
		case u.Kind() == types.UnsafePointer:
			return "nil", true
		}
	case *types.Pointer, *types.Slice, *types.Map, *types.Chan, *types.Signature, *types.Interface:
		return "nil", true
	case *types.Struct, *types.Array:
		if _, named := types.Unalias(t).(*types.Named); named {
			return types.TypeString(t, qual) + "{}", true
		}
	}
	return "", false
}

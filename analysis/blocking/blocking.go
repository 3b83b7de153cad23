// Package blocking is the analysis the other moirai analyzers build on: it
// finds the functions that wait (sleep, channel operations, condition and
// wait-group waits, yields), do I/O (files, network, system calls) or
// acquire a lock, and exports what it finds as a [Fact] on each function,
// so that a wrapper of a waiting function is known as one across packages.
//
// # What counts
//
// The primitives are listed in this file: time.Sleep, runtime.Gosched,
// (*sync.Cond).Wait, (*sync.WaitGroup).Wait, semaphore and errgroup
// waits, channel sends and receives, a select without a default, a range
// over a channel ([Wait]); calls into os, syscall, golang.org/x/sys,
// io, net, net/http clients, os/exec and database/sql that reach the
// outside world ([IO]); sync.Mutex and sync.RWMutex locks ([Lock]).
// A function may do what any of its statements may do, and must do what
// its normal path does: the statements it runs in order until it returns,
// where an if whose branches both wait waits, and an early return inside
// an if (an error path) is not counted against it. That is pBox's
// "waits on all paths" for a wrapper, minus error paths: a wrapper such
// as
//
//	func sleep(ctx context.Context, d time.Duration) error {
//		t := time.NewTimer(d)
//		defer t.Stop()
//		select {
//		case <-t.C:
//			return nil
//		case <-ctx.Done():
//			return ctx.Err()
//		}
//	}
//
// must wait. Calls of function values and of interface methods (but those
// of io and net interfaces, which are I/O) are unknown and count as
// nothing: a false negative the analyzers that use this one note.
//
// # Non-goals
//
// No interprocedural path sensitivity, no alias analysis: the facts are a
// summary per function, computed to a fixed point within a package.
package blocking

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/internal/scan"
)

// Op is a set of kinds of blocking operation.
type Op uint8

// Kinds of blocking operation.
const (
	Wait Op = 1 << iota // sleeps, channel operations, condition waits, yields
	IO                  // files, network, system calls
	Lock                // sync.Mutex and sync.RWMutex acquisitions
)

func (o Op) String() string {
	var s []string
	if o&Wait != 0 {
		s = append(s, "wait")
	}
	if o&IO != 0 {
		s = append(s, "io")
	}
	if o&Lock != 0 {
		s = append(s, "lock")
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "+")
}

// Fact is what a function may and must do. What names one operation
// behind May, for messages: "time.Sleep", "a channel receive".
type Fact struct {
	Must, May Op
	What      string
}

// AFact marks Fact as an analysis fact.
func (*Fact) AFact() {}

func (f *Fact) String() string {
	return fmt.Sprintf("blocking(must=%s may=%s: %s)", f.Must, f.May, f.What)
}

// NewAnalyzer returns an analyzer of moirai's suite that builds on this
// one: named name (its documentation is its package's page), it requires
// [Analyzer], and run gets, besides the pass, the package's [*Result] and
// its functions as [scan.Collect] finds them. run reports through the pass;
// the analyzer returns no result of its own.
func NewAnalyzer(name, doc string, run func(pass *analysis.Pass, blk *Result, funcs *scan.Funcs)) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     name,
		Doc:      doc,
		URL:      "https://pkg.go.dev/github.com/moirai-go/moirai/analysis/" + name,
		Requires: []*analysis.Analyzer{Analyzer},
		Run: func(pass *analysis.Pass) (any, error) {
			run(pass, pass.ResultOf[Analyzer].(*Result), scan.Collect(pass))
			return nil, nil
		},
	}
}

// Analyzer computes the [Fact]s of the package's functions and returns a
// [*Result].
var Analyzer = &analysis.Analyzer{
	Name:       "blocking",
	Doc:        "find the functions that wait, do I/O or lock (a helper of the moirai analyzers; reports nothing)",
	URL:        "https://pkg.go.dev/github.com/moirai-go/moirai/analysis/blocking",
	Run:        run,
	FactTypes:  []analysis.Fact{new(Fact)},
	ResultType: reflect.TypeFor[*Result](),
}

// Result answers what calls and statements of the package may and must
// do.
type Result struct {
	info  *types.Info
	facts map[*types.Func]Fact // this package's functions and the imported ones it calls
}

func run(pass *analysis.Pass) (any, error) {
	r := &Result{info: pass.TypesInfo, facts: map[*types.Func]Fact{}}
	std := isStd(pass)
	// Facts of the imported functions the package calls. All files, so
	// that test files are analysed the same way.
	var decls []*ast.FuncDecl
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body != nil {
					decls = append(decls, n)
				}
			case *ast.CallExpr:
				fn := scan.Callee(pass.TypesInfo, n)
				if fn != nil && fn.Pkg() != nil && fn.Pkg() != pass.Pkg {
					if _, seen := r.facts[fn]; !seen {
						var fact Fact
						pass.ImportObjectFact(fn, &fact)
						r.facts[fn] = fact
					}
				}
			}
			return true
		})
	}
	// This package's functions, to a fixed point: facts only grow.
	for changed := true; changed; {
		changed = false
		for _, d := range decls {
			fn, _ := pass.TypesInfo.Defs[d.Name].(*types.Func)
			if fn == nil {
				continue
			}
			var f Fact
			f.May, f.What = r.May(d.Body, Wait|IO|Lock)
			f.What = root(f.What)
			f.Must, _ = r.must(d.Body.List)
			old := r.facts[fn]
			if old.What != "" {
				f.What = old.What // the first witness: recursion must not grow it
			}
			if old.Must != f.Must || old.May != f.May || old.What != f.What {
				r.facts[fn] = f
				changed = true
			}
		}
	}
	// Exported facts leave locks out: a lock inside another package (a
	// logger's, a pool's) is that package's business, and what a caller
	// holds across it is short. The standard library exports nothing: its
	// blocking functions are the primitives above.
	for _, d := range decls {
		fn, _ := pass.TypesInfo.Defs[d.Name].(*types.Func)
		if fn == nil || std {
			continue
		}
		f := r.facts[fn]
		f.Must &^= Lock
		f.May &^= Lock
		if f.May != 0 {
			if f.May&Lock == 0 && strings.HasSuffix(f.What, ").Lock") || strings.HasSuffix(f.What, ").RLock") {
				f.What = f.May.String()
			}
			pass.ExportObjectFact(fn, &f)
		}
	}
	return r, nil
}

// Of returns the fact of fn, a function of this package or one it calls.
func (r *Result) Of(fn *types.Func) Fact { return r.facts[fn] }

// primitives are the standard waiting and locking functions.
var primitives = map[string]Op{
	"time.Sleep":             Wait,
	"runtime.Gosched":        Wait,
	"(*sync.Cond).Wait":      Wait,
	"(*sync.WaitGroup).Wait": Wait,
	"(*sync.Mutex).Lock":     Lock,
	"(*sync.RWMutex).Lock":   Lock,
	"(*sync.RWMutex).RLock":  Lock,
	"(*golang.org/x/sync/semaphore.Weighted).Acquire": Wait,
	"(*golang.org/x/sync/errgroup.Group).Wait":        Wait,
	"(*golang.org/x/sync/errgroup.Group).Go":          Wait, // waits for a slot under SetLimit
}

// notIO are the names in I/O packages that do no I/O.
var notIO = map[string]bool{
	"Getenv": true, "LookupEnv": true, "Setenv": true, "Unsetenv": true, "Environ": true,
	"Expand": true, "ExpandEnv": true, "Exit": true, "Getpid": true, "Getppid": true,
	"Getuid": true, "Geteuid": true, "Getgid": true, "Getegid": true, "Gettid": true,
	"Getpagesize": true, "IsExist": true, "IsNotExist": true, "IsPermission": true,
	"IsTimeout": true, "NewSyscallError": true, "Name": true, "Fd": true, "Getwd": true,
	"TempDir": true, "UserHomeDir": true, "DirFS": true, "Executable": true, "NewFile": true,
	"SameFile": true, "Error": true, "Is": true, "Temporary": true, "Timeout": true,
	"String": true, "BytePtrFromString": true, "ByteSliceFromString": true,
	"ParseIP": true, "ParseCIDR": true, "JoinHostPort": true, "SplitHostPort": true,
	"Pipe": true, "NopCloser": true, "MultiReader": true, "MultiWriter": true,
	"TeeReader": true, "LimitReader": true, "NewSectionReader": true, "NewOffsetWriter": true,
}

// ioOp reports whether a call of fn reaches the outside world.
func ioOp(fn *types.Func) bool {
	if fn.Pkg() == nil || notIO[fn.Name()] {
		return false
	}
	name := fn.Name()
	sig := fn.Type().(*types.Signature)
	switch path := fn.Pkg().Path(); path {
	case "os", "syscall", "golang.org/x/sys/unix", "golang.org/x/sys/windows", "io/ioutil":
		return true
	case "io":
		if sig.Recv() == nil {
			return strings.HasPrefix(name, "Copy") || strings.HasPrefix(name, "Read") || name == "WriteString"
		}
		return isRW(name)
	case "net":
		if sig.Recv() == nil {
			return strings.HasPrefix(name, "Dial") || strings.HasPrefix(name, "Listen") ||
				strings.HasPrefix(name, "Lookup") || strings.HasPrefix(name, "Resolve")
		}
		return isRW(name) || strings.HasPrefix(name, "Accept")
	case "net/http":
		switch name {
		case "Do", "Get", "Post", "PostForm", "Head", "RoundTrip":
			return sig.Recv() == nil || types.TypeString(sig.Recv().Type(), nil) != "net/http.Header"
		}
	case "os/exec":
		switch name {
		case "Run", "Output", "CombinedOutput", "Wait", "Start":
			return true
		}
	case "database/sql":
		for _, p := range []string{"Query", "Exec", "Begin", "Commit", "Rollback", "Ping", "Prepare", "Conn"} {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	return false
}

func isRW(name string) bool {
	switch name {
	case "Read", "Write", "ReadAt", "WriteAt", "ReadFrom", "WriteTo", "Seek", "Close", "Sync":
		return true
	}
	return strings.HasPrefix(name, "ReadMsg") || strings.HasPrefix(name, "WriteMsg")
}

// Call returns what call must and may do, and an operation it names.
func (r *Result) Call(call *ast.CallExpr) (must, may Op, what string) {
	if fn := scan.Callee(r.info, call); fn != nil {
		if op, ok := primitives[fn.FullName()]; ok {
			return op, op, fn.FullName()
		}
		if ioOp(fn) {
			return IO, IO, fn.FullName()
		}
		if f, ok := r.facts[fn]; ok && f.May != 0 {
			return f.Must, f.May, fn.FullName() + " (" + root(f.What) + ")"
		}
		return 0, 0, ""
	}
	// An interface method of io or net: I/O.
	// Only through a value whose type is one of those interfaces: a
	// hash.Hash is an io.Writer that does no I/O.
	if m := scan.Method(r.info, call); m != nil && m.Pkg() != nil && isRW(m.Name()) {
		sel := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		if n, ok := types.Unalias(r.info.TypeOf(sel.X)).(*types.Named); ok && n.Obj().Pkg() != nil {
			if p := n.Obj().Pkg().Path(); p == "io" || p == "net" {
				return IO, IO, m.FullName()
			}
		}
	}
	return 0, 0, ""
}

// May returns the first operation of a kind in mask that n may do, and
// its kind: it looks inside n but not into function literals (which run
// when called, if ever) nor go statements (which run elsewhere).
func (r *Result) May(n ast.Node, mask Op) (Op, string) {
	var op Op
	var what string
	found := func(o Op, w string) {
		if o&mask != 0 && op == 0 {
			op, what = o&mask, w
		}
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		if op != 0 {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit, *ast.GoStmt:
			return false
		case *ast.SelectStmt:
			if !hasDefault(n.Body) {
				found(Wait, "a select")
			}
			for _, c := range n.Body.List {
				cc := c.(*ast.CommClause)
				for _, s := range cc.Body {
					ast.Inspect(s, visit)
				}
			}
			return false
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				found(Wait, "a channel receive")
			}
		case *ast.SendStmt:
			found(Wait, "a channel send")
		case *ast.RangeStmt:
			if scan.Is[*types.Chan](r.info.TypeOf(n.X)) {
				found(Wait, "a range over a channel")
			}
		case *ast.CallExpr:
			if _, may, w := r.Call(n); may != 0 {
				for _, k := range []Op{Wait, IO, Lock} {
					if may&k != 0 {
						found(k, w)
					}
				}
			}
		}
		return true
	}
	ast.Inspect(n, visit)
	return op, what
}

// MustStmts returns what a statement list must do on its normal path.
func (r *Result) MustStmts(list []ast.Stmt) (Op, string) { return r.must(list) }

// MustExpr returns what evaluating e must do.
func (r *Result) MustExpr(e ast.Expr) (Op, string) { return r.mustExpr(e) }

func (r *Result) must(list []ast.Stmt) (Op, string) {
	for _, st := range list {
		if op, w := r.mustStmt(st); op != 0 {
			return op, w
		}
		switch st := st.(type) {
		case *ast.ReturnStmt, *ast.BranchStmt:
			return 0, ""
		case *ast.ExprStmt:
			if call, ok := st.X.(*ast.CallExpr); ok {
				if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok && id.Name == "panic" {
					return 0, ""
				}
			}
		}
	}
	return 0, ""
}

func (r *Result) mustStmt(st ast.Stmt) (Op, string) {
	switch st := st.(type) {
	case *ast.ReturnStmt:
		for _, e := range st.Results {
			if op, w := r.mustExpr(e); op != 0 {
				return op, w
			}
		}
	case *ast.ExprStmt:
		return r.mustExpr(st.X)
	case *ast.AssignStmt:
		for _, e := range st.Rhs {
			if op, w := r.mustExpr(e); op != 0 {
				return op, w
			}
		}
	case *ast.DeclStmt:
		if gd, ok := st.Decl.(*ast.GenDecl); ok {
			for _, sp := range gd.Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, e := range vs.Values {
						if op, w := r.mustExpr(e); op != 0 {
							return op, w
						}
					}
				}
			}
		}
	case *ast.SendStmt:
		return Wait, "a channel send"
	case *ast.SelectStmt:
		if !hasDefault(st.Body) {
			return Wait, "a select"
		}
	case *ast.DeferStmt:
		return r.mustExpr(st.Call)
	case *ast.LabeledStmt:
		return r.mustStmt(st.Stmt)
	case *ast.BlockStmt:
		return r.must(st.List)
	case *ast.IfStmt:
		if st.Init != nil {
			if op, w := r.mustStmt(st.Init); op != 0 {
				return op, w
			}
		}
		if op, w := r.mustExpr(st.Cond); op != 0 {
			return op, w
		}
		if st.Else != nil {
			a, w := r.must(st.Body.List)
			b, _ := r.mustStmt(st.Else)
			if a&b != 0 {
				return a & b, w
			}
		}
	case *ast.ForStmt:
		if st.Init != nil {
			if op, w := r.mustStmt(st.Init); op != 0 {
				return op, w
			}
		}
		if st.Cond != nil {
			return r.mustExpr(st.Cond)
		}
	case *ast.RangeStmt:
		if scan.Is[*types.Chan](r.info.TypeOf(st.X)) {
			return Wait, "a range over a channel"
		}
		return r.mustExpr(st.X)
	}
	return 0, ""
}

// mustExpr returns what evaluating e must do: the left operand of && and
// || only, nothing inside function literals.
func (r *Result) mustExpr(e ast.Expr) (Op, string) {
	var op Op
	var what string
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		if op != 0 {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				ast.Inspect(n.X, visit)
				return false
			}
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				op, what = Wait, "a channel receive"
				return false
			}
		case *ast.CallExpr:
			if must, _, w := r.Call(n); must != 0 {
				op, what = must, w
				return false
			}
		}
		return true
	}
	if e != nil {
		ast.Inspect(e, visit)
	}
	return op, what
}

func hasDefault(body *ast.BlockStmt) bool {
	for _, c := range body.List {
		if cc, ok := c.(*ast.CommClause); ok && cc.Comm == nil {
			return true
		}
	}
	return false
}

// root returns the innermost operation of a witness: "time.Sleep" for
// "pkg.sleep (time.Sleep)".
func root(what string) string {
	i := strings.LastIndex(what, " (")
	if i < 0 {
		return what
	}
	inner := what[i+2:]
	for strings.Count(inner, ")") > strings.Count(inner, "(") {
		inner = strings.TrimSuffix(inner, ")")
	}
	return inner
}

// isStd reports whether the pass is over a standard library package: its
// files are in GOROOT.
func isStd(pass *analysis.Pass) bool {
	if len(pass.Files) == 0 || build.Default.GOROOT == "" {
		return false
	}
	name := pass.Fset.File(pass.Files[0].Pos()).Name()
	return strings.HasPrefix(name, filepath.Join(build.Default.GOROOT, "src")+string(filepath.Separator))
}

package doccheck

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository's root, from this package.
const root = "../.."

// docs returns the Markdown files a newcomer reads, from the root.
func docs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "bench/README.md", "bench/CASES.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator))))
	}
	var out []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// block is one ```go code block.
type block struct {
	dir    string // the root, absolute
	file   string // from the root
	line   int    // of the block's first line of code
	params string // of a snippet; "" for none
	module string // the module whose requirements build it, from the root ("bench" unless the snippet comment says "in DIR")
	code   string
}

var snippetComment = regexp.MustCompile(`^<!--\s*snippet(?:\s+in\s+(\S+))?:\s*(.*?)\s*-->\s*$`)

// blocks returns the ```go blocks of the Markdown text of file.
func blocks(dir, file, text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := block{dir: dir, file: file, line: i + 2, module: "bench"}
		if i > 0 {
			if m := snippetComment.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.params = m[2]
				if m[1] != "" {
					b.module = m[1]
				}
			}
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		if j == len(lines) {
			return nil, fmt.Errorf("%s:%d: unterminated ```go block", file, i+1)
		}
		b.code = strings.Join(lines[i+1:j], "\n") + "\n"
		out = append(out, b)
		i = j
	}
	return out, nil
}

// imports maps the package names a snippet may use to their import paths;
// the workspace's packages are added by TestCodeBlocksBuildAndVet.
var imports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log",
	"slog": "log/slog", "http": "net/http", "os": "os", "sql": "database/sql",
	"strings": "strings", "sync": "sync", "time": "time", "net": "net",
	"grpc":       "google.golang.org/grpc",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
	"otelhttp":   "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
}

// source returns the Go file of b as package name: a whole file as it is,
// a snippet wrapped into a function.
func (b block) source(name string) (string, error) {
	directive := fmt.Sprintf("//line %s:%d\n", filepath.Join(b.dir, b.file), b.line)
	if strings.HasPrefix(b.code, "package ") {
		return directive + b.code, nil
	}
	used, err := packagesUsed(b.params + "\n" + b.code)
	if err != nil {
		return "", fmt.Errorf("%s:%d: %w", b.file, b.line, err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "package %s\n\nimport (\n", name)
	for _, p := range used {
		fmt.Fprintf(&s, "\t%s %q\n", p, imports[p])
	}
	fmt.Fprintf(&s, ")\n\nfunc snippet(%s) error {\n%s%s", b.params, directive, b.code)
	if !endsWithReturn(b.code) {
		s.WriteString("return nil\n")
	}
	s.WriteString("}\n")
	return s.String(), nil
}

// packagesUsed returns the names of imports that code refers to (an
// identifier of the table followed by a dot, not itself after a dot).
func packagesUsed(code string) ([]string, error) {
	var sc scanner.Scanner
	fset := token.NewFileSet()
	src := []byte(code)
	var errs scanner.ErrorList
	sc.Init(fset.AddFile("", -1, len(src)), src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	var used []string
	prev, prevLit := token.ILLEGAL, ""
	before := token.ILLEGAL
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev == token.IDENT && before != token.PERIOD {
			if _, ok := imports[prevLit]; ok && !slices.Contains(used, prevLit) {
				used = append(used, prevLit)
			}
		}
		before, prev, prevLit = prev, tok, lit
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	slices.Sort(used)
	return used, nil
}

func endsWithReturn(code string) bool {
	lines := strings.Split(strings.TrimRight(code, "\n"), "\n")
	last := lines[len(lines)-1]
	return strings.HasPrefix(last, "return ") || last == "return"
}

// TestCodeBlocksBuildAndVet builds every ```go block of the docs and runs
// go vet on them (see the package doc for the snippet convention).
func TestCodeBlocksBuildAndVet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every code block with go vet")
	}
	idx, err := index(root)
	if err != nil {
		t.Fatal(err)
	}
	// The workspace's importable packages; of two with one name, the
	// shorter path.
	var all []*pkgInfo
	for _, ps := range idx.pkgs {
		all = append(all, ps...)
	}
	slices.SortFunc(all, func(a, b *pkgInfo) int { return cmp.Or(len(a.path)-len(b.path), strings.Compare(a.path, b.path)) })
	for _, p := range all {
		if _, ok := imports[p.name]; !ok && !p.main && !strings.Contains(p.path, "/internal/") && !strings.Contains(p.path, "/bench") {
			imports[p.name] = p.path
		}
	}
	// A module of its own in a temporary directory, requiring what the
	// lab requires (so that it builds from the same module cache), each
	// block a package of it.
	mods := map[string]string{} // module dir from the root → its temporary module
	pkgs := map[string][]string{}
	n := 0
	for _, f := range docs(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		abs, err := filepath.Abs(root)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := blocks(abs, f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			n++
			mod, ok := mods[b.module]
			if !ok {
				mod = t.TempDir()
				if err := writeModule(mod, b.module); err != nil {
					t.Fatalf("%s:%d: %v", b.file, b.line, err)
				}
				mods[b.module] = mod
			}
			dir := fmt.Sprintf("b%02d", n)
			src, err := b.source("snippet")
			if err != nil {
				t.Error(err)
				continue
			}
			if err := os.Mkdir(filepath.Join(mod, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mod, dir, "snippet.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			pkgs[b.module] = append(pkgs[b.module], "./"+dir)
		}
	}
	if n == 0 {
		t.Fatal("no ```go block in the docs")
	}
	for m, mod := range mods {
		cmd := exec.Command("go", append([]string{"vet"}, pkgs[m]...)...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go vet on the docs' %d code blocks built with %s's requirements: %v\n%s", len(pkgs[m]), m, err, out)
		}
	}
}

// writeModule writes into dir the go.mod and go.sum of a module that
// requires what the module in the directory from (from the root: the lab's,
// "bench", unless a snippet names another) requires, the workspace's
// modules replaced by their directories.
func writeModule(dir, from string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	mod, err := os.ReadFile(filepath.Join(root, from, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, from, "go.sum"))
	if err != nil {
		return err
	}
	text := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(mod), "module doccheck.example")
	text = regexp.MustCompile(`=> (\.\.?(?:/\S*)?)`).ReplaceAllStringFunc(text, func(m string) string {
		return "=> " + filepath.Join(abs, from, strings.TrimPrefix(m, "=> "))
	})
	if from == "bench" {
		// The lab itself, for the names a block may take from it.
		text += fmt.Sprintf("\nrequire github.com/moirai-go/moirai/bench v0.0.0-00010101000000-000000000000\n\nreplace github.com/moirai-go/moirai/bench => %s\n", filepath.Join(abs, "bench"))
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
}

// The API names of the docs.

// pkgInfo is what one package declares.
type pkgInfo struct {
	name, path string
	main       bool
	decls      map[string]bool
	types      map[string]*typeInfo
}

// typeInfo is what one named type declares.
type typeInfo struct {
	pkg      *pkgInfo
	members  map[string]bool // methods, fields, interface methods
	embedded []typeRef       // embedded fields, and an alias's target
}

var testFunc = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)`)

type typeRef struct{ pkg, name string } // pkg "" is the type's own package

type apiIndex struct {
	pkgs  map[string][]*pkgInfo  // by package name
	types map[string][]*typeInfo // by type name
}

// index parses the non-test Go files of every package under dir.
func index(dir string) (*apiIndex, error) {
	idx := &apiIndex{pkgs: map[string][]*pkgInfo{}, types: map[string][]*typeInfo{}}
	byDir := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != dir && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		p := byDir[rel]
		if p == nil {
			name := strings.TrimSuffix(f.Name.Name, "_test")
			p = &pkgInfo{name: name, path: "github.com/moirai-go/moirai/" + filepath.ToSlash(rel), main: name == "main",
				decls: map[string]bool{}, types: map[string]*typeInfo{}}
			if rel == "." {
				p.path = "github.com/moirai-go/moirai"
			}
			byDir[rel] = p
			idx.pkgs[p.name] = append(idx.pkgs[p.name], p)
		}
		if !strings.HasSuffix(path, "_test.go") {
			idx.addFile(p, f)
			return nil
		}
		// Of a test file, the tests, benchmarks, fuzz targets and
		// examples, which docs/GUARANTEES.md names as pkg.TestName.
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && testFunc.MatchString(fd.Name.Name) {
				p.decls[fd.Name.Name] = true
			}
		}
		return nil
	})
	return idx, err
}

func (idx *apiIndex) typ(p *pkgInfo, name string) *typeInfo {
	t := p.types[name]
	if t == nil {
		t = &typeInfo{pkg: p, members: map[string]bool{}}
		p.types[name] = t
		idx.types[name] = append(idx.types[name], t)
	}
	return t
}

func (idx *apiIndex) addFile(p *pkgInfo, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.decls[d.Name.Name] = true
				continue
			}
			if name := recvName(d.Recv.List[0].Type); name != "" {
				idx.typ(p, name).members[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.decls[n.Name] = true
					}
				case *ast.TypeSpec:
					p.decls[s.Name.Name] = true
					t := idx.typ(p, s.Name.Name)
					if s.Assign.IsValid() {
						if r, ok := refOf(s.Type); ok {
							t.embedded = append(t.embedded, r)
						}
					}
					switch st := s.Type.(type) {
					case *ast.StructType:
						for _, fl := range st.Fields.List {
							if len(fl.Names) == 0 {
								if r, ok := refOf(fl.Type); ok {
									t.members[r.name] = true
									t.embedded = append(t.embedded, r)
								}
							}
							for _, n := range fl.Names {
								t.members[n.Name] = true
							}
						}
					case *ast.InterfaceType:
						for _, m := range st.Methods.List {
							for _, n := range m.Names {
								t.members[n.Name] = true
							}
							if r, ok := refOf(m.Type); ok && len(m.Names) == 0 {
								t.embedded = append(t.embedded, r)
							}
						}
					}
				}
			}
		}
	}
}

// recvName returns the type name of a method's receiver.
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// refOf returns the named type e denotes (T, *T, pkg.T, T[X]).
func refOf(e ast.Expr) (typeRef, bool) {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return typeRef{name: x.Name}, true
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				return typeRef{pkg: id.Name, name: x.Sel.Name}, true
			}
			return typeRef{}, false
		default:
			return typeRef{}, false
		}
	}
}

// hasMember reports whether t has member m, promoted ones included.
func (idx *apiIndex) hasMember(t *typeInfo, m string, seen map[*typeInfo]bool) bool {
	if t.members[m] {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	for _, r := range t.embedded {
		var cands []*pkgInfo
		if r.pkg == "" {
			cands = []*pkgInfo{t.pkg}
		} else {
			cands = idx.pkgs[r.pkg]
		}
		for _, p := range cands {
			if e := p.types[r.name]; e != nil && idx.hasMember(e, m, seen) {
				return true
			}
		}
	}
	return false
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	apiName  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(.*\))?$`)
)

func exported(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// check returns why the API name span does not resolve, or "" when it
// resolves or is not a name of the workspace.
func (idx *apiIndex) check(span string) string {
	m := apiName.FindStringSubmatch(span)
	if m == nil {
		return ""
	}
	parts := append([]string{m[1]}, strings.Split(m[2], ".")[1:]...)
	if !exported(parts[0]) {
		pkgs := idx.pkgs[parts[0]]
		if len(pkgs) == 0 || !exported(parts[1]) {
			return ""
		}
		if !slices.ContainsFunc(pkgs, func(p *pkgInfo) bool { return p.decls[parts[1]] }) {
			return fmt.Sprintf("package %s declares no %s", parts[0], parts[1])
		}
		if len(parts) < 3 || !exported(parts[2]) {
			return ""
		}
		for _, p := range pkgs {
			if t := p.types[parts[1]]; t != nil && idx.hasMember(t, parts[2], map[*typeInfo]bool{}) {
				return ""
			}
		}
		return fmt.Sprintf("%s.%s has no member %s", parts[0], parts[1], parts[2])
	}
	ts := idx.types[parts[0]]
	if len(ts) == 0 || !exported(parts[1]) {
		return ""
	}
	for _, t := range ts {
		if idx.hasMember(t, parts[1], map[*typeInfo]bool{}) {
			return ""
		}
	}
	return fmt.Sprintf("no type %s of the workspace has a member %s", parts[0], parts[1])
}

// outside are spans naming code outside the workspace whose package
// shares its name with one inside.
var outside = map[string]string{
	"semaphore.Weighted": "golang.org/x/sync/semaphore (package semaphore is also moirai vet's analyzer)",
	"tree.Ascend":        "etcd's key index, which moirai vet analyzes (package tree is also the request trees')",
}

// TestAPINamesResolve checks that every API name the docs mention in a
// code span is declared in the workspace.
func TestAPINamesResolve(t *testing.T) {
	idx, err := index(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range docs(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(stripCodeBlocks(string(text)), "\n") {
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if apiName.MatchString(m[1]) {
					checked++
				}
				if why := idx.check(m[1]); why != "" && outside[m[1]] == "" {
					t.Errorf("%s:%d: `%s`: %s", f, i+1, m[1], why)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d code spans look like API names; the docs mention hundreds", checked)
	}
}

// stripCodeBlocks blanks the fenced code blocks of a Markdown text,
// keeping its line count.
func stripCodeBlocks(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

func TestCheck(t *testing.T) {
	idx := &apiIndex{pkgs: map[string][]*pkgInfo{}, types: map[string][]*typeInfo{}}
	fset := token.NewFileSet()
	add := func(path, src string) {
		f, err := parser.ParseFile(fset, "x.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := &pkgInfo{name: f.Name.Name, path: path, decls: map[string]bool{}, types: map[string]*typeInfo{}}
		idx.pkgs[p.name] = append(idx.pkgs[p.name], p)
		idx.addFile(p, f)
	}
	add("a", `package a
type Base struct{ Field int }
func (*Base) Method() {}
type Spec struct { Base; Goal float64 }
type Alias = Spec
type Other = b.Remote
func New() {}`)
	add("b", `package b
type Remote struct{}
func (Remote) Far() {}`)
	for _, tc := range []struct {
		span string
		ok   bool
	}{
		{"a.New", true}, {"a.New()", true}, {"a.Spec.Goal", true}, {"a.Spec.Method", true}, {"a.Spec.Field", true},
		{"Spec.Goal", true}, {"Alias.Goal", true}, {"Other.Far", true}, {"a.Old", false}, {"a.Spec.Gone", false},
		{"Spec.Gone", false}, {"a.Alias.Method", true},
		// Not API names of the workspace: not checked.
		{"c.Gone", true}, {"Unknown.Gone", true}, {"ctl.Snapshot()", true}, {"a.go", true}, {"results.json", true},
	} {
		if got := idx.check(tc.span) == ""; got != tc.ok {
			t.Errorf("check(%q) resolves = %v, want %v", tc.span, got, tc.ok)
		}
	}
}

func TestBlocks(t *testing.T) {
	md := "text\n<!-- snippet: ctx context.Context, ctl *moirai.Controller -->\n```go\nx := 1\n_ = x\n```\n\n```go\npackage main\n\nfunc main() {}\n```\n"
	bs, err := blocks("/r", "f.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].params != "ctx context.Context, ctl *moirai.Controller" || bs[0].line != 4 || bs[1].params != "" || bs[1].line != 9 {
		t.Fatalf("blocks = %+v", bs)
	}
	imports["moirai"] = "github.com/moirai-go/moirai"
	src, err := bs[0].source("p")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`context "context"`, `moirai "github.com/moirai-go/moirai"`, "func snippet(ctx context.Context, ctl *moirai.Controller) error {\n//line /r/f.md:4\nx := 1", "return nil\n}"} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
	if bs[0].module != "bench" || bs[1].module != "bench" {
		t.Errorf("blocks without a module: %q, %q; want the lab's", bs[0].module, bs[1].module)
	}
	if in, err := blocks("/r", "f.md", "<!-- snippet in otelmoirai/test: addr string -->\n```go\nx\n```\n"); err != nil || len(in) != 1 || in[0].module != "otelmoirai/test" || in[0].params != "addr string" {
		t.Errorf("a snippet naming its module: %+v, %v", in, err)
	}
	if _, err := blocks("/r", "f.md", "```go\nx\n"); err == nil {
		t.Error("an unterminated block is no error")
	}
	if got := bytes.Count([]byte(stripCodeBlocks(md)), []byte("\n")); got != strings.Count(md, "\n") {
		t.Errorf("stripCodeBlocks changed the line count")
	}
}

// TestREADMEReadsInAMinute checks the README's size: under 200 lines, none
// over 300 characters (a table row with a paragraph in a cell is not read).
func TestREADMEReadsInAMinute(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) >= 200 {
		t.Errorf("README.md has %d lines, want under 200", len(lines))
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > 300 {
			t.Errorf("README.md:%d has %d characters, want at most 300", i+1, n)
		}
	}
}

package debugpage_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/policy"
)

// glossary returns the terms docs/GLOSSARY.md defines: the code spans
// before the first ": " of each "- " line.
func glossary(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/GLOSSARY.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	span := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "- `") {
			continue
		}
		head, _, ok := strings.Cut(line, ": ")
		if !ok {
			t.Errorf("GLOSSARY.md: %q has no definition", line)
			continue
		}
		for _, m := range span.FindAllStringSubmatch(head, -1) {
			defined[m[1]] = true
		}
	}
	return defined
}

// jsonNames returns the JSON member names of t's fields, recursively.
func jsonNames(t reflect.Type, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
		jsonNames(f.Type, out)
	}
}

// sources parses the non-test Go files of the library's directories dirs,
// from the root.
func sources(t *testing.T, dirs ...string) []*ast.File {
	t.Helper()
	var files []*ast.File
	fset := token.NewFileSet()
	for _, dir := range dirs {
		names, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	return files
}

// The library code whose decisions the page shows: the controller's loop
// and re-execution, and the policies it runs by default or on request.
var decisionDirs = []string{".", "cancel", "penalty", "trend", "detect", "fence"}

// The policies that attach details to their decisions (the others' slog
// attributes are log lines).
var detailDirs = []string{"cancel", "penalty", "trend"}

// detailKeys returns the keys of the slog attributes the decision makers
// build: a decision's details.
func detailKeys(files []*ast.File) map[string]bool {
	keys := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "slog" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if k, err := strconv.Unquote(lit.Value); err == nil {
					keys[k] = true
				}
			}
			return true
		})
	}
	return keys
}

// reasonLiterals returns the string literals that end up in a decision's
// reason, note or a candidate's why: those in the values given to fields
// Reason, Note and Why, and assigned to them or to the variables the
// explanations are built in.
func reasonLiterals(files []*ast.File) []string {
	targets := map[string]bool{"Reason": true, "Note": true, "Why": true, "why": true, "how": true, "what": true, "among": true}
	var out []string
	collect := func(e ast.Expr) {
		ast.Inspect(e, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, s)
				}
			}
			return true
		})
	}
	name := func(e ast.Expr) string {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name
		case *ast.SelectorExpr:
			return x.Sel.Name
		}
		return ""
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.KeyValueExpr:
				if targets[name(x.Key)] {
					collect(x.Value)
				}
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if targets[name(l)] && len(x.Rhs) == len(x.Lhs) {
						collect(x.Rhs[i])
					}
				}
			}
			return true
		})
	}
	return out
}

// paperWords are the papers' names and symbols, which a user reading a
// decision cannot look up: the glossary's words say the same.
var paperWords = []string{"t_f", "λ", "Q_lower", "SCT", "pBox", "Atropos", "DAGOR", "PathFence", "Inf", "C_r"}

// reasonTerms are the words of the reasons that are moirai's terms rather
// than plain English; with the hyphenated and underscored words of the
// reasons (found by the test), each needs an entry.
var reasonTerms = []string{"class", "contention", "contended", "episode", "candidate", "non-dominated", "dominated",
	"insufficient", "foreground", "background", "minimum gain", "known to be heavy", "objective", "resource-s",
	"progress", "deferred", "tolerates", "concurrency", "reservation", "dead band", "peak"}

// TestGlossaryDefinesWhatThePageShows checks that docs/GLOSSARY.md defines
// every field of the page and its JSON, every column, every section's row,
// every key of a decision's details, every name a decision's policy,
// action, outcome and progress sources take, and every term of the
// reasons; and that no reason speaks in the papers' symbols.
func TestGlossaryDefinesWhatThePageShows(t *testing.T) {
	defined := glossary(t)
	need := map[string]string{} // term -> where it is shown
	add := func(where string, terms ...string) {
		for _, term := range terms {
			if term = strings.TrimSpace(term); term != "" {
				if _, ok := need[term]; !ok {
					need[term] = where
				}
			}
		}
	}

	// The JSON's members.
	json := map[string]bool{}
	jsonNames(reflect.TypeFor[debugpage.View](), json)
	add("the page's JSON", slices.Sorted(func(yield func(string) bool) {
		for k := range json {
			if !yield(k) {
				return
			}
		}
	})...)

	// The HTML's headings and columns, from a page served with a
	// resource, a task and a decision.
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	ctl.Mutex("table:orders")
	_, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "GET /", Cancellable: true})
	_ = ctl.Cancel(tk.ID(), "by hand")
	tk.End(nil)
	rec := httptest.NewRecorder()
	debugpage.Handler(ctl, debugpage.Config{}).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/moirai", nil))
	page := rec.Body.String()
	for _, m := range regexp.MustCompile(`<th>([^<]*)</th>|<h2>([^<(]*)`).FindAllStringSubmatch(page, -1) {
		add("the page's columns and headings", m[1], m[2])
	}
	if !strings.Contains(page, "no overload detected") {
		t.Error("the page does not say whether overload is detected")
	}

	// Sections' rows, and the labels of the fence's values.
	f, err := fence.New(8, []fence.Reservation{{Name: "inventory:443", Permits: 4}})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := cpu.NewPool(cpu.WithBudget(2), cpu.WithTick(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	v := debugpage.Collect(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.AdmissionSection("admission", admit.NewDAGOR()),
		debugpage.FenceSection("fence", f, fence.NewTuner(f)),
		debugpage.CPUSection("cpu", cpu.ReadBudget(fstest.MapFS{}), pool),
	}})
	for title, rows := range v.Sections {
		for _, row := range rows {
			if (title == "fence" && row[0] == "inventory:443") || (title == "cpu" && row[0] == "pool") {
				// Values labelled one by one: "permits 4 · in use 0 · …",
				// "active 2 of 2 (overcommit 1) · running 0 · …".
				for _, part := range strings.Split(row[1], " · ") {
					if label, _, ok := strings.Cut(part, ":"); ok { // "tuner: peak …"
						add("the "+title+" section", label)
						continue
					}
					for _, w := range regexp.MustCompile(`[a-z][a-z ]*[a-z]`).FindAllString(part, -1) {
						if w != "of" {
							add("the "+title+" section", w)
						}
					}
				}
				if title == "fence" {
					continue
				}
			}
			if title == "fence" && row[0] != "pool" {
				continue // the local path: its name is the fence's
			}
			src, _, _ := strings.Cut(strings.TrimPrefix(row[0], "· "), " ")
			add("the "+title+" section", src)
		}
	}

	// Decisions: the details' keys and the values of names.
	files := sources(t, decisionDirs...)
	for k := range detailKeys(sources(t, detailDirs...)) {
		add("a decision's details", k)
	}
	for _, a := range []policy.Action{policy.Cancel, policy.Penalize, policy.Diagnose} {
		add("a decision's action", a.String())
	}
	for _, o := range []policy.Outcome{policy.Acted, policy.Skipped, policy.DryRun} {
		add("a decision's outcome", o.String())
	}
	for _, v := range []cancel.Variant{cancel.MultiObjective, cancel.Greedy, cancel.CurrentUsage} {
		add("a decision's policy", v.String())
	}
	add("a decision's policy", penalty.New().Name(), "trend", "manual", "tree", "reexecution")
	for _, s := range []estimate.Source{estimate.Reported, estimate.History, estimate.Lindy} {
		add("progress_from", s.String())
	}
	for _, s := range []cancel.FutureSource{cancel.FromProgress, cancel.FromClassUse, cancel.FromDemand} {
		add("future_from", s.String())
	}
	add("the detectors firing", "slo", "collapse", "trend")

	// Reasons: no paper symbols; their terms defined.
	jargon := regexp.MustCompile(`\b[a-z]+(?:[-_][a-z]+)+\b`)
	lits := reasonLiterals(files)
	if len(lits) < 30 {
		t.Fatalf("found %d reason literals in %v; the scan is broken", len(lits), decisionDirs)
	}
	for _, s := range lits {
		for _, w := range paperWords {
			if strings.Contains(s, w) {
				t.Errorf("a reason says %q, a paper's word: %q", w, s)
			}
		}
		for _, w := range jargon.FindAllString(s, -1) {
			add("a reason ("+s+")", w)
		}
		for _, w := range reasonTerms {
			if strings.Contains(s, w) {
				add("a reason ("+s+")", w)
			}
		}
	}

	for _, term := range slices.Sorted(func(yield func(string) bool) {
		for k := range need {
			if !yield(k) {
				return
			}
		}
	}) {
		if !defined[term] && !defined[strings.ToLower(term)] {
			t.Errorf("docs/GLOSSARY.md does not define %q, shown in %s", term, need[term])
		}
	}
}

// TestLockHasNoCapacity checks that the page shows a lock's missing
// capacity as such, not as a capacity of 0.
func TestLockHasNoCapacity(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	ctl.Mutex("table:orders")
	ctl.Semaphore("connections", 10)
	v := debugpage.Collect(ctl, debugpage.Config{})
	got := map[string]debugpage.ResourceView{}
	for _, r := range v.Resources {
		got[r.Name] = r
	}
	if r := got["table:orders"]; r.Kind != "lock" || r.Capacity != 0 {
		t.Errorf("mutex: %+v, want kind lock, capacity 0", r)
	}
	if r := got["connections"]; r.Kind != "queue" || r.Capacity != 10 {
		t.Errorf("semaphore: %+v, want kind queue, capacity 10", r)
	}
	rec := httptest.NewRecorder()
	debugpage.Handler(ctl, debugpage.Config{}).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/moirai", nil))
	if !strings.Contains(rec.Body.String(), "<td>table:orders</td><td>lock</td><td>–</td>") {
		t.Errorf("the page does not show the lock's capacity as –:\n%s", rec.Body.String())
	}
}

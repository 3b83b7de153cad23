// Command mutants checks that the tests docs/GUARANTEES.md names catch
// the breakage of the guarantees they check.
//
// Each *.mutant file beside this command (scripts/mutants) is a mutant: a
// small change that breaks exactly one guarantee, and the tests that must
// then fail. For each mutant in turn, on a scratch copy of the repository, the
// command runs the tests unchanged (they must pass), applies the change,
// and runs them again: they must fail, by a test's failure, within 60 s.
// A mutant survives if the tests pass; it is a failure too if the change
// no longer applies (its anchor is gone or ambiguous: another change moved
// the code, re-anchor it), if the mutated code does not compile, or if the
// tests only time out (a hang is no detection: the tests must fail on
// their own, under their own deadline).
//
// Usage, from the repository's root:
//
//	go run ./scripts/mutants                 every mutant
//	go run ./scripts/mutants -shard 3/8      the mutants whose index is 3 mod 8 (a rotating subset)
//	go run ./scripts/mutants -run guard-     the mutants whose name matches a regexp
//	go run ./scripts/mutants -write          every mutant, and the table into docs/GUARANTEES.md
//
// It prints a table (guarantee, mutant, test, failed in N s) and exits 1
// if any mutant was not killed.
//
// # The mutant format
//
//	guarantee: Cancellations are at least the minimum interval apart.
//	package: . ./task           the packages of the tests, from the root (one module)
//	tests: TestA TestB          test names, run with -run '^(TestA|TestB)$'
//	race: true                  optional: run the tests with -race
//	file: loop.go               then one or more hunks of this file:
//	<<<<
//	exact lines, found exactly once
//	====
//	their replacement
//	>>>>
//
// Lines starting with # are comments. Several file: sections may follow.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mutantsDir holds the mutants, from the repository's root.
const mutantsDir = "scripts/mutants"

// testTimeout is how long the mutated tests may run (go test -timeout);
// a run that reaches it is a time-out, not a kill.
const testTimeout = 60 * time.Second

// wallLimit bounds one go test invocation, compiling included.
const wallLimit = 6 * time.Minute

type hunk struct{ find, replace string }

type edit struct {
	file  string
	hunks []hunk
}

type mutant struct {
	name      string
	guarantee string
	pkgs      []string
	tests     []string
	race      bool
	edits     []edit
}

type result struct {
	m       *mutant
	outcome string // killed, survived, stale, no-compile, timeout, baseline-fails
	secs    float64
	detail  string
}

func main() {
	shard := flag.String("shard", "", "i/n: run only the mutants whose index is i mod n")
	run := flag.String("run", "", "run only the mutants whose name matches this regexp")
	write := flag.Bool("write", false, "write the table into docs/GUARANTEES.md (all mutants only)")
	flag.Parse()
	if err := mainErr(*shard, *run, *write); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func mainErr(shard, run string, write bool) error {
	ms, err := load(mutantsDir)
	if err != nil {
		return err
	}
	all := len(ms)
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return err
		}
		ms = slices.DeleteFunc(ms, func(m *mutant) bool { return !re.MatchString(m.name) })
	}
	if shard != "" {
		i, n, err := parseShard(shard)
		if err != nil {
			return err
		}
		var sel []*mutant
		for k, m := range ms {
			if k%n == i {
				sel = append(sel, m)
			}
		}
		ms = sel
	}
	if write && len(ms) != all {
		return errors.New("-write needs every mutant (no -run, no -shard)")
	}
	scratch, err := os.MkdirTemp("", "moirai-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := copyRepo(scratch); err != nil {
		return err
	}
	fmt.Printf("%d of %d mutants, scratch copy %s\n", len(ms), all, scratch)
	var results []result
	baseline := map[string]error{}
	for _, m := range ms {
		r := runMutant(scratch, m, baseline)
		fmt.Printf("%-40s %-14s %6.1fs %s\n", m.name, r.outcome, r.secs, r.detail)
		results = append(results, r)
	}
	table := render(results)
	fmt.Println()
	fmt.Print(table)
	if write {
		if err := writeTable("docs/GUARANTEES.md", table); err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range results {
		if r.outcome != "killed" {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d mutants not killed", bad, len(results))
	}
	return nil
}

func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("-shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// load reads every *.mutant file of dir, sorted by name.
func load(dir string) ([]*mutant, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.mutant"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no mutants in %s (run from the repository's root)", dir)
	}
	slices.Sort(names)
	var ms []*mutant
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m, err := parse(strings.TrimSuffix(filepath.Base(name), ".mutant"), string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func parse(name, text string) (*mutant, error) {
	m := &mutant{name: name}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var state string // "", "find", "replace"
	var buf []string
	for line := 0; sc.Scan(); line++ {
		l := sc.Text()
		switch {
		case state == "" && (strings.HasPrefix(l, "#") || strings.TrimSpace(l) == ""):
		case state == "" && l == "<<<<":
			if len(m.edits) == 0 {
				return nil, fmt.Errorf("line %d: a hunk before any file field", line+1)
			}
			state, buf = "find", nil
		case state == "find" && l == "====":
			m.edits[len(m.edits)-1].hunks = append(m.edits[len(m.edits)-1].hunks, hunk{find: strings.Join(buf, "\n") + "\n"})
			state, buf = "replace", nil
		case state == "replace" && l == ">>>>":
			e := &m.edits[len(m.edits)-1]
			e.hunks[len(e.hunks)-1].replace = strings.Join(buf, "\n")
			if len(buf) > 0 {
				e.hunks[len(e.hunks)-1].replace += "\n"
			}
			state = ""
		case state != "":
			buf = append(buf, l)
		default:
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				return nil, fmt.Errorf("line %d: %q is neither a field nor a hunk", line+1, l)
			}
			v = strings.TrimSpace(v)
			switch k {
			case "guarantee":
				m.guarantee = v
			case "package":
				m.pkgs = strings.Fields(v)
			case "tests":
				m.tests = strings.Fields(v)
			case "race":
				m.race = v == "true"
			case "file":
				m.edits = append(m.edits, edit{file: v})
			default:
				return nil, fmt.Errorf("line %d: unknown field %q", line+1, k)
			}
		}
	}
	switch {
	case state != "":
		return nil, errors.New("unterminated hunk")
	case m.guarantee == "" || len(m.pkgs) == 0 || len(m.tests) == 0:
		return nil, errors.New("guarantee, package and tests are required")
	case len(m.edits) == 0 || len(m.edits[0].hunks) == 0:
		return nil, errors.New("no change")
	}
	return m, sc.Err()
}

// copyRepo copies the repository's files (tracked and untracked, not
// ignored) into dst.
func copyRepo(dst string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || strings.HasSuffix(f, ".mutant") {
			continue
		}
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func runMutant(scratch string, m *mutant, baseline map[string]error) result {
	r := result{m: m}
	// Apply first (and restore at once) to report a stale mutant before
	// spending a test run on it.
	restore, err := apply(scratch, m)
	if err != nil {
		r.outcome, r.detail = "stale", err.Error()
		return r
	}
	restore()
	key := fmt.Sprint(m.pkgs, m.tests, m.race)
	if _, ok := baseline[key]; !ok {
		res := goTest(scratch, m)
		if res.outcome != "survived" { // the tests failed unchanged
			baseline[key] = fmt.Errorf("the tests fail without the mutant (%s): %s", res.outcome, res.detail)
		} else {
			baseline[key] = nil
		}
	}
	if err := baseline[key]; err != nil {
		r.outcome, r.detail = "baseline-fails", err.Error()
		return r
	}
	restore, err = apply(scratch, m)
	if err != nil {
		r.outcome, r.detail = "stale", err.Error()
		return r
	}
	defer restore()
	return goTest(scratch, m)
}

// apply makes m's changes in the scratch copy; restore undoes them.
func apply(scratch string, m *mutant) (restore func(), err error) {
	saved := map[string][]byte{}
	restore = func() {
		for p, b := range saved {
			os.WriteFile(p, b, 0o644)
		}
	}
	for _, e := range m.edits {
		p := filepath.Join(scratch, e.file)
		if _, ok := saved[p]; !ok {
			b, err := os.ReadFile(p)
			if err != nil {
				restore()
				return nil, fmt.Errorf("no longer applies: %s: %v", e.file, err)
			}
			saved[p] = b
		}
		cur, err := os.ReadFile(p)
		if err != nil {
			restore()
			return nil, err
		}
		for i, h := range e.hunks {
			switch n := bytes.Count(cur, []byte(h.find)); n {
			case 1:
				cur = bytes.Replace(cur, []byte(h.find), []byte(h.replace), 1)
			default:
				restore()
				return nil, fmt.Errorf("no longer applies: %s hunk %d: its lines are found %d times, want once (re-anchor it): %q",
					e.file, i+1, n, firstLine(h.find))
			}
		}
		if err := os.WriteFile(p, cur, 0o644); err != nil {
			restore()
			return nil, err
		}
	}
	return restore, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

var (
	pkgTime  = regexp.MustCompile(`(?m)^(?:FAIL|ok)\s+\S+\s+([0-9.]+)s`)
	timedOut = regexp.MustCompile(`panic: test timed out after`)
	noTests  = regexp.MustCompile(`(?m)^testing: warning: no tests to run|\[no tests to run\]`)
)

// goTest runs m's tests in the scratch copy; the outcome says what a
// mutated run means: survived (passed), killed (a test failed), timeout,
// no-compile.
func goTest(scratch string, m *mutant) result {
	r := result{m: m}
	var modDir string
	var rels []string
	for _, pkg := range m.pkgs {
		dir, rel, err := moduleOf(scratch, pkg)
		if err != nil {
			r.outcome, r.detail = "stale", err.Error()
			return r
		}
		if modDir != "" && dir != modDir {
			r.outcome, r.detail = "stale", "packages "+strings.Join(m.pkgs, " ")+" are in different modules now: split the mutant"
			return r
		}
		modDir = dir
		rels = append(rels, rel)
	}
	args := []string{"test", "-count=1", "-timeout", testTimeout.String(), "-run", "^(" + strings.Join(m.tests, "|") + ")$"}
	if m.race {
		args = append(args, "-race")
	}
	args = append(args, rels...)
	ctx, cancel := context.WithTimeout(context.Background(), wallLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	text := out.String()
	r.secs = wall.Seconds()
	if mms := pkgTime.FindAllStringSubmatch(text, -1); mms != nil {
		r.secs = 0
		for _, mm := range mms { // the slowest package's test time
			v, _ := strconv.ParseFloat(mm[1], 64)
			r.secs = max(r.secs, v)
		}
	}
	switch {
	case ctx.Err() != nil:
		r.outcome, r.detail = "timeout", fmt.Sprintf("go test still running after %v", wallLimit)
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		r.outcome, r.detail = "no-compile", lastLines(text, 4)
	case noTests.MatchString(text):
		r.outcome, r.detail = "stale", "no test matches "+strings.Join(m.tests, " ")+" (renamed?)"
	case timedOut.MatchString(text):
		r.outcome, r.detail = "timeout", "the tests hung until go test's -timeout "+testTimeout.String()
	case err == nil:
		r.outcome = "survived"
	default:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			r.outcome, r.detail = "no-compile", err.Error()
			break
		}
		r.outcome, r.detail = "killed", failedTests(text)
	}
	return r
}

// moduleOf returns the directory of the module holding pkg (the nearest
// go.mod above it) and pkg relative to it.
func moduleOf(scratch, pkg string) (string, string, error) {
	dir := filepath.Join(scratch, pkg)
	if _, err := os.Stat(dir); err != nil {
		return "", "", fmt.Errorf("no longer applies: package %s: %v", pkg, err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			rel, err := filepath.Rel(d, dir)
			return d, "./" + filepath.ToSlash(rel), err
		}
		if d == scratch || d == filepath.Dir(d) {
			return "", "", fmt.Errorf("no go.mod above %s", pkg)
		}
	}
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

func failedTests(text string) string {
	var names []string
	for _, mm := range failLine.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(names, mm[1]) {
			names = append(names, mm[1])
		}
	}
	if len(names) == 0 {
		return lastLines(text, 3)
	}
	return "failed: " + strings.Join(names, " ")
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// render is the table for GUARANTEES.md.
func render(rs []result) string {
	var b strings.Builder
	b.WriteString("| guarantee | mutant | packages | tests | failed in |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		var tests []string
		for _, t := range r.m.tests {
			tests = append(tests, "`"+t+"`")
		}
		if r.m.race {
			tests[len(tests)-1] += " (-race)"
		}
		failed := fmt.Sprintf("%.2f s", r.secs)
		if r.outcome != "killed" {
			failed = "**" + r.outcome + "**"
		}
		var pkgs []string
		for _, p := range r.m.pkgs {
			p = strings.TrimPrefix(p, "./")
			if p == "." {
				p = "moirai"
			}
			pkgs = append(pkgs, p)
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", r.m.guarantee, r.m.name, strings.Join(pkgs, ", "), strings.Join(tests, ", "), failed)
	}
	return b.String()
}

const (
	beginMark = "<!-- mutants:begin (generated by go run ./scripts/mutants -write; do not edit) -->"
	endMark   = "<!-- mutants:end -->"
)

// writeTable replaces the text between the markers in path with table.
func writeTable(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %q and %q not found", path, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + table + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

package vet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"os"
	"sort"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"
)

// Options are what [Run] analyses and how.
type Options struct {
	Dir   string   // the directory patterns are relative to; "" for the current one
	Env   []string // the go command's environment; nil for the process's
	Tests bool     // also load test packages (their files are never reported on)
	Fix   bool     // apply the suggested fixes to the files
}

// Finding is one diagnostic.
type Finding struct {
	Analyzer string    `json:"analyzer"`
	Pos      string    `json:"pos"` // file:line:column
	Message  string    `json:"message"`
	Related  []Related `json:"related,omitempty"`
	Fixes    int       `json:"fixes,omitempty"` // suggested fixes offered
}

// Related is a position a finding also concerns.
type Related struct {
	Pos     string `json:"pos"`
	Message string `json:"message"`
}

// Report is what [Run] found.
type Report struct {
	Packages int       `json:"packages"` // packages analysed
	Findings []Finding `json:"findings"`
	Errors   []string  `json:"errors,omitempty"` // packages that did not load or type-check
	Fixed    []string  `json:"fixed,omitempty"`  // files rewritten by Fix
}

// ErrNoPackages is returned when the patterns match no package.
var ErrNoPackages = errors.New("vet: no packages matched")

// Run loads the packages patterns match and runs [Analyzers] on them. A
// package that does not type-check is listed in Report.Errors and not
// analysed; Run fails only when nothing could be loaded. With opts.Fix it
// applies every suggested fix that does not overlap another and formats
// the files it changes; otherwise it writes nothing.
func Run(ctx context.Context, patterns []string, opts Options) (*Report, error) {
	cfg := &packages.Config{
		Mode:    packages.LoadAllSyntax,
		Context: ctx,
		Dir:     opts.Dir,
		Env:     opts.Env,
		Tests:   opts.Tests,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("vet: %w", err)
	}
	if len(pkgs) == 0 {
		return nil, ErrNoPackages
	}
	rep := &Report{Findings: []Finding{}}
	var ok []*packages.Package
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			for _, e := range p.Errors {
				rep.Errors = append(rep.Errors, e.Error())
			}
			continue
		}
		ok = append(ok, p)
	}
	rep.Packages = len(ok)
	if len(ok) == 0 {
		return rep, nil
	}
	graph, err := checker.Analyze(Analyzers(), ok, nil)
	if err != nil {
		return nil, fmt.Errorf("vet: %w", err)
	}
	var fixes []analysis.TextEdit
	var fset *token.FileSet
	seen := map[string]bool{}
	for _, act := range graph.Roots {
		if act.Err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", act, act.Err))
			continue
		}
		fset = act.Package.Fset
		for _, d := range act.Diagnostics {
			f := Finding{Analyzer: act.Analyzer.Name, Pos: fset.Position(d.Pos).String(), Message: d.Message, Fixes: len(d.SuggestedFixes)}
			for _, r := range d.Related {
				f.Related = append(f.Related, Related{Pos: fset.Position(r.Pos).String(), Message: r.Message})
			}
			key := f.Analyzer + f.Pos + f.Message // a package and its test variant
			if seen[key] {
				continue
			}
			seen[key] = true
			rep.Findings = append(rep.Findings, f)
			for _, sf := range d.SuggestedFixes {
				fixes = append(fixes, sf.TextEdits...)
			}
		}
	}
	sort.Slice(rep.Findings, func(i, j int) bool { return rep.Findings[i].Pos < rep.Findings[j].Pos })
	if opts.Fix && len(fixes) > 0 {
		files, err := applyFixes(fset, fixes)
		rep.Fixed = files
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// applyFixes applies edits to their files, skipping duplicates and edits
// that overlap an earlier one, formats the results and writes them. It
// returns the files it wrote.
func applyFixes(fset *token.FileSet, edits []analysis.TextEdit) ([]string, error) {
	type edit struct {
		start, end int
		text       []byte
	}
	byFile := map[string][]edit{}
	for _, e := range edits {
		f := fset.File(e.Pos)
		if f == nil {
			continue
		}
		end := e.End
		if !end.IsValid() {
			end = e.Pos
		}
		byFile[f.Name()] = append(byFile[f.Name()], edit{f.Offset(e.Pos), f.Offset(end), e.NewText})
	}
	var names []string
	for name := range byFile {
		names = append(names, name)
	}
	sort.Strings(names)
	var written []string
	for _, name := range names {
		es := byFile[name]
		sort.SliceStable(es, func(i, j int) bool { return es[i].start < es[j].start })
		src, err := os.ReadFile(name)
		if err != nil {
			return written, fmt.Errorf("vet: fix: %w", err)
		}
		var out bytes.Buffer
		at := 0
		for _, e := range es {
			if e.start < at || e.end > len(src) {
				continue // overlaps an edit already applied, or stale
			}
			out.Write(src[at:e.start])
			out.Write(e.text)
			at = e.end
		}
		out.Write(src[at:])
		formatted, err := format.Source(out.Bytes())
		if err != nil {
			return written, fmt.Errorf("vet: fix %s: the result does not parse: %w", name, err)
		}
		info, err := os.Stat(name)
		if err != nil {
			return written, fmt.Errorf("vet: fix: %w", err)
		}
		if err := os.WriteFile(name, formatted, info.Mode().Perm()); err != nil {
			return written, fmt.Errorf("vet: fix: %w", err)
		}
		written = append(written, name)
	}
	return written, nil
}

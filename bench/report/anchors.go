package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/moirai-go/moirai/bench"
	// The in-process cases, registered by their package, say which are
	// the lock cases of protego's anchor.
	_ "github.com/moirai-go/moirai/bench/inproc"
)

// An anchor is one baseline's entry in the table of sources and anchor
// checks: where it comes from, how it is checked against its source's
// published shape (or why it cannot be), where it is swept, and what the
// loaded rows say of the check.
type anchor struct {
	baseline, suite, source, check, sweep string
	// result returns what the rows say of the check, "" if they hold
	// nothing for it.
	result func(rows []bench.Row) string
}

// anchors are every baseline of every suite.
var anchors = []anchor{
	{"codel (baseline.RPCCoDel, adaptive LIFO)", "dagor", "Maurer, \"Fail at Scale\", ACM Queue 2015",
		"the DAGOR paper (SoCC'18): every overload control about as good as DAGOR on one-call tasks (M1), CoDel well below it on M2–M4; TestRPCCoDelTraces: capacity served on generated Poisson traces, with and without late wake-ups",
		"codel@sweep: target 5–40 ms × interval 50–200 ms", anchorCoDelM1},
	{"codel-rfc (baseline.CoDel)", "dagor", "RFC 8289 (Nichols, Jacobson)",
		"TestCoDel replays RFC 8289's control law step by step; no paper gives a figure of it on RPC requests",
		"codel-rfc@sweep, as codel", nil},
	{"random", "dagor", "the DAGOR paper's random shedding",
		"the DAGOR paper: below DAGOR on M2–M4, by more as the calls per task grow",
		"random@sweep: window 50–200 ms × queueing-time threshold 5–40 ms (default DAGOR's detection, 100 ms and 20 ms)", anchorRandom},
	{"sre (baseline.SRE, K = 2)", "dagor", "Google SRE book, client-side throttling",
		"TestSREThrottlesWhenRejected checks the book's rejection probability; no figure in the book",
		"sre@sweep: K = 1.1, 1.5, 3 beside the book's 2", nil},
	{"protego (baseline.Protego)", "inproc", "Cho et al., NSDI'23 (a delay budget per lock wait), as the Atropos paper runs it",
		protegoCheck(),
		"protego@sweep: budget 0.5× and 2× the objective", anchorProtego},
	{"codel (baseline.CoDel)", "inproc", "RFC 8289",
		"TestCoDel (the RFC's control law); no published figure for in-process worker slots",
		"codel@sweep: 1ms/50ms, 10ms/100ms, 20ms/200ms", nil},
	{"breakwater (baseline.Breakwater)", "inproc", "Cho et al., OSDI'20",
		"TestBreakwater checks its AIMD law against the authors' formula; its figures are for µs-scale RPCs with credits at the clients, which an in-process server has not, so none applies",
		"breakwater@sweep: a fixed target of 500 µs, 5 ms, 20 ms", nil},
	{"timeout (statement_timeout, lock_timeout)", "postgres, mysql", "the servers' own settings, as operators set them",
		"none published for these workloads: the servers' documented behaviour is the check (a statement past its timeout is cancelled, the row's cancels)",
		"timeout@sweep: 1s/1s, 2s/1s, 10s/5s (default 5s/2s)", nil},
	{"ptkill", "postgres, mysql", "Percona Toolkit's pt-kill (--busy-time, --victims oldest)",
		"none published: the tool itself on MariaDB, its rule as SQL on PostgreSQL",
		"ptkill@sweep: busy time 1s, 2s, 10s (default 5s)", nil},
	{"static (Vegas)", "pathfence", "go-concurrency-limits' Vegas limit at its defaults (alpha 3, beta 6 × log10 of the limit, smoothing 1), starting at and capped by U's pool",
		"none published for this topology (the library has no paper; TCP Vegas's figures are for congestion windows); TestDefaultVegasIsTheLibrarys checks that static's limit follows the library's defaults sample for sample",
		"static@sweep: alpha/beta 1/2, 3/6, 6/12 × smoothing 1, 0.5, 0.2; its fixed counterpart limit-N (static per-service limits) beside it; the best of all of them per case in the suite's \"Baselines at their best\"", nil},
	{"fixed-K", "pathfence", "path fences of fixed reservations",
		"none: the sweep over K is itself the comparison (the best fixed split)",
		"fixed-6 … fixed-14", nil},
	{"ignorant, optimal", "cpu", "static pools: the CPU budget, and an oracle's share of it",
		"none: the two ends of a static pool's size",
		"static-N: static pools of N workers", nil},
}

// anchorCoDelM1 is codel's success over dagor's on M1 at 2× and 4×, at its
// default and its best setting.
func anchorCoDelM1(rows []bench.Row) string {
	idx := indexDagor(rows)
	var parts []string
	for _, f := range []float64{2, 4} {
		d, ok := idx[dagorKey{"M1", "dagor", f}]
		if !ok || d.Error != "" || d.SuccessRate <= 0 {
			continue
		}
		if c, ok := idx[dagorKey{"M1", "codel", f}]; ok && c.Error == "" {
			q := c.SuccessRate / d.SuccessRate
			parts = append(parts, fmt.Sprintf("%s M1 at %g×: %.2f of dagor's success (default)", metWord(math.Abs(q-1) <= 0.1), f, q))
		}
		if c, ok := bestOf(rows, "codel", "M1", f); ok && c.Controller != "codel" {
			parts = append(parts, fmt.Sprintf("M1 at %g×: %.2f best-tuned (%s)", f, c.SuccessRate/d.SuccessRate, c.Controller))
		}
	}
	return strings.Join(parts, "; ")
}

// anchorRandom is random's success over dagor's on M2–M4 at 4×, at its
// default and its best setting.
func anchorRandom(rows []bench.Row) string {
	idx := indexDagor(rows)
	var parts []string
	for _, cs := range []string{"M2", "M3", "M4"} {
		for _, f := range []float64{4} {
			d, okD := idx[dagorKey{cs, "dagor", f}]
			r, okR := idx[dagorKey{cs, "random", f}]
			if !okD || d.Error != "" || d.SuccessRate <= 0 {
				continue
			}
			if okR && r.Error == "" {
				parts = append(parts, fmt.Sprintf("%s at %g×: %.2f of dagor's", cs, f, r.SuccessRate/d.SuccessRate))
			}
			if b, ok := bestOf(rows, "random", cs, f); ok && b.Controller != "random" {
				parts = append(parts, fmt.Sprintf("%s at %g×: %.2f best-tuned (%s)", cs, f, b.SuccessRate/d.SuccessRate, b.Controller))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// anchorProtego is the range of protego's drop rate over the in-process
// lock cases the Atropos paper's "about half" covers, those whose culprit
// holds its lock for about half the run (bench.Case.LockExposure ≈ ½),
// and its drop rate on the other lock cases beside their exposure.
func anchorProtego(rows []bench.Row) string {
	exposure := map[string]float64{}
	for _, c := range bench.Cases("inproc") {
		exposure[c.Name] = c.LockExposure
	}
	var drops []float64
	var others []string
	for _, r := range rows {
		e := exposure[r.Case]
		if r.Controller != "protego" || r.Error != "" || e <= 0 {
			continue
		}
		if halfExposed(e) {
			drops = append(drops, r.DropRate)
		} else {
			others = append(others, fmt.Sprintf("%s %s (exposed %s)", r.Case, fmtPct(r.DropRate), fmtPct(e)))
		}
	}
	var out string
	if len(drops) > 0 {
		lo, hi := slices.Min(drops), slices.Max(drops)
		cases := "lock cases"
		if len(drops) == 1 {
			cases = "lock case"
		}
		out = fmt.Sprintf("%s %s–%s dropped on its %d %s held about half the run (about half: 35–65 %%)", metWord(lo >= 0.35 && hi <= 0.65), fmtPct(lo), fmtPct(hi), len(drops), cases)
	}
	if len(others) > 0 {
		if out != "" {
			out += "; "
		}
		out += "outside the anchor: " + strings.Join(others, ", ")
	}
	return out
}

// halfExposed says whether a lock case's exposure is the shape of the
// Atropos paper's lock cases, about half the requests.
func halfExposed(e float64) bool { return e >= 0.4 && e <= 0.6 }

// protegoCheck is the text of protego's anchor check: which lock cases
// the paper's figure applies to, and why not to the others.
func protegoCheck() string {
	var half, others []string
	for _, c := range bench.Cases("inproc") {
		switch e := c.LockExposure; {
		case e <= 0:
		case halfExposed(e):
			half = append(half, c.Name)
		default:
			others = append(others, fmt.Sprintf("%s %s", c.Name, fmtPct(e)))
		}
	}
	s := "the Atropos paper: it drops about half the requests on the lock cases. Protego drops the requests that meet the culprit's hold of the lock with more than their budget of it left (a case's exposure), so the figure applies where the culprit holds its lock in one stretch for about half the run"
	if len(half) > 0 {
		s += " (" + strings.Join(half, ", ") + ")"
	}
	if len(others) > 0 {
		s += "; on the other lock cases it should drop their exposure, not half (" + strings.Join(others, ", ") + ": the culprit holds its lock for less of the run, or in batches a request arriving late in meets its budget)"
	}
	return s + "; TestProtegoWaitInProgress checks that the budget is per lock wait, so a job queueing briefly between batches is not dropped"
}

// markdownAnchors writes the table of every baseline's source, anchor
// check, sweep and the check's result in the loaded rows.
func markdownAnchors(p func(string, ...any), rs []*bench.Results) {
	p("## Baselines: sources, anchor checks and sweeps\n\n")
	p("Each baseline a claim rests on, the source it follows, how it is checked against that source's published shape (or why it cannot be), ")
	p("the sweep that gives its best-tuned row (reported beside its default in its suite's section), and what each run above says of the check (the runs with the cases' own culprits). ")
	p("A result from a run that other work on the machine slowed is noisy: compare it with its suite's section before quoting it.\n\n")
	p("| baseline | suite | source | anchor check | sweep | result in these runs |\n|---|---|---|---|---|---|\n")
	for _, a := range anchors {
		var parts []string
		for _, r := range rs {
			if a.result == nil || strings.HasPrefix(r.Params["culprit"], "stream") {
				continue // the anchors are for the cases' own culprits
			}
			if s := a.result(r.Rows); s != "" {
				parts = append(parts, "run of "+startedText(r)+": "+s)
			}
		}
		res := "–"
		if len(parts) > 0 {
			res = strings.Join(parts, "; ")
		}
		p("| %s | %s | %s | %s | %s | %s |\n", mdText(a.baseline), mdText(a.suite), mdText(a.source), mdText(a.check), mdText(a.sweep), mdText(res))
	}
	p("\n")
}

package report

import (
	"slices"

	"github.com/moirai-go/moirai/bench"
)

// betterNormalized says whether row a serves the light requests better
// than row b, for the suites whose rows are normalized by a normal run
// (inproc, postgres, mysql): the higher SLO attainment, then the higher
// throughput_norm, then the lower p99_norm. Failed rows are never better.
func betterNormalized(a, b bench.Row) bool {
	switch {
	case a.Error != "" || b.Error != "":
		return a.Error == "" && b.Error != ""
	case a.SLOAttainment != b.SLOAttainment:
		return a.SLOAttainment > b.SLOAttainment
	case a.ThroughputNorm != b.ThroughputNorm:
		return a.ThroughputNorm > b.ThroughputNorm
	}
	return a.P99Norm < b.P99Norm
}

// bestNormalized returns the best-tuned row of base on a case: the best
// by betterNormalized among base's rows at its default and at every
// setting, the default winning ties; ok is false if base has no row there.
func bestNormalized(rows []bench.Row, base, cs string) (best bench.Row, ok bool) {
	for _, r := range rows {
		if r.Case != cs || baseOf(r.Controller) != base {
			continue
		}
		if !ok || betterNormalized(r, best) || (r.Controller == base && !betterNormalized(best, r)) {
			best, ok = r, true
		}
	}
	return best, ok
}

// markdownTunedNormalized writes, for every controller the rows run at
// settings (NAME@SETTING), its row at the default beside its best-tuned
// row on each case, and the setting that won.
func markdownTunedNormalized(p func(string, ...any), name string, rows []bench.Row) {
	bases := tunedBases(rows)
	if len(bases) == 0 {
		return
	}
	var cases []string
	for _, r := range rows {
		if !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
	}
	p("\n### Baselines at their best in %s\n\n", mdCode(name))
	p("Each tunable baseline at its default and at its best setting of the sweep on each case (rows NAME@SETTING above): ")
	p("the best serves the light requests best, the highest SLO attainment, then throughput_norm, then the lowest p99_norm. ")
	p("Each cell: SLO attainment, throughput_norm / p99_norm, drop rate.\n\n")
	p("| case |")
	for _, b := range bases {
		p(" %s default | %s best-tuned |", mdCode(b), mdCode(b))
	}
	p("\n|---|")
	for range bases {
		p("--:|--:|")
	}
	p("\n")
	cell := func(r bench.Row) string {
		if r.Error != "" {
			return "failed"
		}
		return fmtPct(r.SLOAttainment) + ", " + fmtNorm(r.ThroughputNorm) + " / " + fmtNorm(r.P99Norm) + ", " + fmtPct(r.DropRate)
	}
	for _, cs := range cases {
		p("| %s |", mdCode(cs))
		for _, b := range bases {
			def := "–"
			for _, r := range rows {
				if r.Case == cs && r.Controller == b {
					def = cell(r)
				}
			}
			best := "–"
			if r, ok := bestNormalized(rows, b, cs); ok {
				best = cell(r) + " at " + mdText(settingOf(r.Controller))
			}
			p(" %s | %s |", def, best)
		}
		p("\n")
	}
}

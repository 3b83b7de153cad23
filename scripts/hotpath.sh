#!/usr/bin/env bash
# scripts/hotpath.sh: the hot path's regression guard. It runs the
# primitives' benchmark pairs (BenchmarkX/baseline, the standard library's
# or x/sync's primitive, beside BenchmarkX/moirai) in one test process,
# and fails when a ratio exceeds its target by more than 30 %, or when a
# moirai run allocates. For the uncontended pairs the ratio is that of the
# fastest stretches (min-ns/op, the fastest 256 operations of any run: see
# bench_test.go), which other processes on the machine disturb least; for
# the RunParallel pairs, that of the fastest runs' ns/op. The table shows
# both. It compares
# times taken in one process, so the machine's speed cancels out; it is
# not a timed test. The table it prints:
#
#   benchmark  baseline and moirai ns/op (min-max over the runs), their
#   ratio (of the minima), baseline and moirai min-ns/op, their ratio,
#   target, limit (target + 30 %), allocs, verdict
#
# Targets (issue 30): Mutex ≤ 2× sync.Mutex and Semaphore ≤ 1.3×
# x/sync/semaphore uncontended, their RunParallel forms ≤ 1.5×.
#
# Environment: COUNT (runs of each pair, default 6), BENCHTIME (per run,
# default 200ms), SLACK (allowed excess over a target, default 0.30).
# Run at normal priority on an idle machine; it prints the load average.
set -euo pipefail

cd "$(dirname "$0")/.."

count=${COUNT:-6}
benchtime=${BENCHTIME:-200ms}
slack=${SLACK:-0.30}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
out=$(go test -run '^$' -bench '^Benchmark(Mutex|MutexParallel|Semaphore|SemaphoreParallel)$' \
	-benchtime="$benchtime" -count="$count" -benchmem . 2>&1) || {
	printf '%s\n' "$out"
	echo "hotpath: the benchmarks failed" >&2
	exit 1
}

printf '%s\n' "$out" | awk -v slack="$slack" '
BEGIN {
	target["Mutex"] = 2.0
	target["Semaphore"] = 1.3
	target["MutexParallel"] = 1.5
	target["SemaphoreParallel"] = 1.5
}
/^Benchmark[A-Za-z]+\/(baseline|moirai)(-[0-9]+)?[ \t]/ {
	split($1, p, "/")
	name = substr(p[1], 10)
	side = p[2]; sub(/-[0-9]+$/, "", side)
	ns = ""; mn = ""; allocs = 0
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "ns/op") ns = $i
		if ($(i+1) == "min-ns/op") mn = $i
		if ($(i+1) == "allocs/op") allocs = $i
	}
	if (!(name in target) || ns == "") next
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	if (side == "baseline") {
		k = ++nb[name]; bns[name, k] = ns
		bmin[name] = (k == 1 || ns < bmin[name]) ? ns : bmin[name]
		bmax[name] = (k == 1 || ns > bmax[name]) ? ns : bmax[name]
		if (mn != "") blap[name] = (!(name in blap) || mn < blap[name]) ? mn : blap[name]
	} else {
		k = ++nm[name]; mns[name, k] = ns
		mmin[name] = (k == 1 || ns < mmin[name]) ? ns : mmin[name]
		mmax[name] = (k == 1 || ns > mmax[name]) ? ns : mmax[name]
		if (mn != "") mlap[name] = (!(name in mlap) || mn < mlap[name]) ? mn : mlap[name]
		if (allocs + 0 > maxalloc[name] + 0) maxalloc[name] = allocs
	}
}
END {
	if (n < 4) { print "hotpath: expected 4 benchmark pairs, found " n; exit 1 }
	printf "%-18s %-13s %-13s %5s %9s %9s %6s %6s %5s %6s  %s\n", "benchmark", "baseline", "moirai", "ratio", "base-min", "moir-min", "ratio", "target", "limit", "allocs", "verdict"
	bad = 0
	for (j = 1; j <= n; j++) {
		name = order[j]
		if (!nb[name] || !nm[name]) { print "hotpath: no pair for " name; bad = 1; continue }
		ratio = mmin[name] / bmin[name]
		lap = (name in blap && name in mlap)
		lratio = lap ? mlap[name] / blap[name] : ratio
		limit = target[name] * (1 + slack)
		verdict = "ok"
		if (lratio > limit) { verdict = "FAIL: ratio"; bad = 1 }
		if (maxalloc[name] + 0 > 0) { verdict = "FAIL: allocates"; bad = 1 }
		printf "%-18s %-13s %-13s %5.2f %9s %9s %6s %6.2f %5.2f %6d  %s\n", name,
			sprintf("%.2f-%.2f", bmin[name], bmax[name]), sprintf("%.2f-%.2f", mmin[name], mmax[name]), ratio,
			lap ? sprintf("%.2f", blap[name]) : "-", lap ? sprintf("%.2f", mlap[name]) : "-",
			lap ? sprintf("%.2f", lratio) : "-", target[name], limit, maxalloc[name], verdict
	}
	exit bad
}'

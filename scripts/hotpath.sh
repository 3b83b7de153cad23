#!/usr/bin/env bash
# scripts/hotpath.sh: the hot path's regression guard. It runs the
# primitives' benchmark pairs (BenchmarkX/baseline, the standard library's
# or x/sync's primitive, beside BenchmarkX/moirai) in one test process,
# pairs the i-th baseline run with the i-th moirai run, and fails
# when the median ratio of a pair exceeds its target by more than 30 %, or
# when a moirai run allocates. It compares ratios within one run, so the
# machine's speed and load cancel out to first order; it is not a timed
# test. The table it prints:
#
#   benchmark  baseline ns/op (min–max)  moirai ns/op (min–max)
#   ratio (min median max)  target  limit  allocs  verdict
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
	ns = ""; allocs = 0
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "ns/op") ns = $i
		if ($(i+1) == "allocs/op") allocs = $i
	}
	if (!(name in target) || ns == "") next
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	if (side == "baseline") {
		k = ++nb[name]; bns[name, k] = ns
		bmin[name] = (k == 1 || ns < bmin[name]) ? ns : bmin[name]
		bmax[name] = (k == 1 || ns > bmax[name]) ? ns : bmax[name]
	} else {
		k = ++nm[name]; mns[name, k] = ns
		mmin[name] = (k == 1 || ns < mmin[name]) ? ns : mmin[name]
		mmax[name] = (k == 1 || ns > mmax[name]) ? ns : mmax[name]
		if (allocs + 0 > maxalloc[name] + 0) maxalloc[name] = allocs
	}
}
END {
	if (n < 4) { print "hotpath: expected 4 benchmark pairs, found " n; exit 1 }
	printf "%-18s %-16s %-16s %-20s %6s %6s %6s  %s\n", "benchmark", "baseline ns/op", "moirai ns/op", "ratio min/med/max", "target", "limit", "allocs", "verdict"
	bad = 0
	for (j = 1; j <= n; j++) {
		name = order[j]; k = (nb[name] < nm[name]) ? nb[name] : nm[name]
		if (k == 0) { print "hotpath: no pair for " name; bad = 1; continue }
		for (a = 1; a <= k; a++) r[a] = mns[name, a] / bns[name, a]
		for (a = 2; a <= k; a++) { v = r[a]; b = a - 1; while (b >= 1 && r[b] > v) { r[b+1] = r[b]; b-- } r[b+1] = v }
		med = (k % 2) ? r[(k+1)/2] : (r[k/2] + r[k/2+1]) / 2
		limit = target[name] * (1 + slack)
		verdict = "ok"
		if (med > limit) { verdict = "FAIL: ratio"; bad = 1 }
		if (maxalloc[name] + 0 > 0) { verdict = "FAIL: allocates"; bad = 1 }
		printf "%-18s %-16s %-16s %-20s %6.2f %6.2f %6d  %s\n", name,
			sprintf("%.2f-%.2f", bmin[name], bmax[name]), sprintf("%.2f-%.2f", mmin[name], mmax[name]),
			sprintf("%.2f/%.2f/%.2f", r[1], med, r[k]), target[name], limit, maxalloc[name], verdict
	}
	exit bad
}'

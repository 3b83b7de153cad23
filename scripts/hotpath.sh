#!/usr/bin/env bash
# scripts/hotpath.sh: the hot path's regression guard, run by
# .ci/run. It runs scripts/hotpath (go run ./scripts/hotpath; see its
# documentation for the method): the primitives' baseline/moirai pairs
# timed in one process, alternating the two sides in short stretches so
# that the machine's noise falls on both (the parallel pairs by their
# threads' CPU time, Linux only), and fails when the median of the rounds'
# ratios exceeds its target by more than 30 %, or when moirai's side
# allocates. It prints the table and the load average before and
# after. Targets: Mutex ≤ 2× sync.Mutex and Semaphore ≤ 1.3×
# x/sync/semaphore uncontended, their parallel forms ≤ 1.5×.
#
# Arguments go to the command: -rounds, -stretches, -stretch, -slack,
# -run (a regexp of pair names), -v (each round's figures).
# `go test -run '^$' -bench '^Benchmark(Mutex|Semaphore)' .` runs the same
# pairs as benchmarks, one side after the other.
set -euo pipefail

cd "$(dirname "$0")/.."

exec go run ./scripts/hotpath "$@"

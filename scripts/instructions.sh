#!/usr/bin/env bash
# scripts/instructions.sh: the instructions one operation of a benchmark
# executes, counted by valgrind's callgrind: a measure of a hot path that a
# shared machine's load does not move, for comparing two versions of it
# (the wall and CPU times of docs/RUNTIME.md's tables move by tens of per
# cent with the load).
#
#   scripts/instructions.sh ./httpmw 'Request/moirai' '*handler*ServeHTTP'
#   scripts/instructions.sh ./httpmw 'Request/baseline' '*ServeMux*ServeHTTP'
#   scripts/instructions.sh ./grpcmw 'Unary/moirai' '*UnaryServerInterceptor.func1'
#
# Arguments: the package (a directory; grpcmw is a module of its own, run
# from its directory), a -bench pattern naming one benchmark, and the
# function whose calls are counted, callees included (callgrind's
# --toggle-collect; without it, the whole process). The benchmark runs on
# one goroutine (GOMAXPROCS=1, -cpu 1) with the collector off (GOGC=off:
# what a collection costs depends on timing), asynchronous preemption
# off (callgrind does not survive its signals) and RDTSCP unused (the
# runtime's cycle counter uses it where the CPU has it, and valgrind does
# not decode it), N and 2N times; the
# difference over N is one operation's count, free of the start-up's.
set -euo pipefail

pkg=${1:?package}
bench=${2:?benchmark pattern}
toggle=${3:-}
n=${N:-50000}

command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$pkg" && go test -c -o "$dir/bench.test" .)

count() {
	local opt=()
	[ -n "$toggle" ] && opt=(--toggle-collect="$toggle")
	(cd "$pkg" && GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind "${opt[@]}" \
		--callgrind-out-file="$dir/out.$1" "$dir/bench.test" -test.run '^$' -test.bench "$bench" \
		-test.benchtime "${1}x" -test.cpu 1 2>&1) | awk '/Collected/ {print $4}'
}
a=$(count "$n")
b=$(count $((2 * n)))
echo "$bench ${toggle:-(whole process)}: $(((b - a) / n)) instructions/op"

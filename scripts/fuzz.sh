#!/usr/bin/env bash
# scripts/fuzz.sh: run every fuzz target of every module of the workspace
# (go.work) for a while each and keep what they found interesting as
# committed seed corpus.
#
#   scripts/fuzz.sh                 every target, 5 minutes each, 2 at a time
#   FUZZTIME=30s JOBS=1 scripts/fuzz.sh
#   scripts/fuzz.sh ./guard/mysql   the targets of some packages only
#   KEEP=0 scripts/fuzz.sh          do not copy the inputs found into testdata
#
# Each target runs with -parallel 1 (JOBS targets at once). A target that
# finds a failure stops the script's exit status at 1; the failing input
# is in the package's testdata/fuzz/<Target>/, as go test leaves it. The
# inputs the fuzzer found interesting are copied from the Go build cache
# into testdata/fuzz/<Target>/ too, so `go test github.com/moirai-go/moirai/...`
# (and CI) runs them all as regression tests. A summary line per target
# gives its executions.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5m}
jobs=${JOBS:-2}
keep=${KEEP:-1}
pkgs=("${@:-github.com/moirai-go/moirai/...}")
cache=$(go env GOCACHE)/fuzz
log=$(mktemp -d)

mapfile -t targets < <(go list -f '{{.ImportPath}} {{.Dir}}' "${pkgs[@]}" | while read -r ip dir; do
	grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed "s|^func |$ip $dir |"
done)

run() {
	local ip=$1 dir=$2 fz=$3 out="$log/${ip//\//_}.$fz"
	status=FAILED
	for attempt in 1 2; do
		if go test "$ip" -run '^$' -fuzz "^$fz\$" -fuzztime "$fuzztime" -parallel 1 >"$out" 2>&1; then
			status=ok
			break
		fi
		# The fuzzer's own deadline can expire while it is still starting
		# on a loaded machine (most of a short -fuzztime goes to the
		# baseline coverage): "context deadline exceeded" with no failing
		# input is not a finding. Run such a target once more.
		if ! grep -q 'context deadline exceeded' "$out" || grep -q 'Failing input' "$out"; then
			break
		fi
	done
	local execs
	execs=$(grep -o 'execs: [0-9]*' "$out" | tail -1 | cut -d' ' -f2)
	if [ "$keep" = 1 ] && [ -d "$cache/$ip/$fz" ]; then
		mkdir -p "$dir/testdata/fuzz/$fz"
		cp -n "$cache/$ip/$fz"/* "$dir/testdata/fuzz/$fz/" 2>/dev/null || true
	fi
	printf '%-8s %-45s %-28s %12s execs in %s\n' "$status" "$ip" "$fz" "${execs:-?}" "$fuzztime"
	[ "$status" = ok ] || { tail -20 "$out"; return 1; }
}

fail=0
for t in "${targets[@]}"; do
	read -r ip dir fz <<<"$t"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || fail=1; done
	run "$ip" "$dir" "$fz" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || fail=1; done
rm -rf "$log"
exit $fail

#!/bin/sh
# Runs moirai vet on Prometheus's released source (a copy of the module
# cache's) and prints the report; extra arguments go to moirai vet (e.g.
# -o json). The packages: the query path the integration instruments
# (promql, web/api/v1), the storage under it (tsdb, storage) and the rule
# manager that shares the engine (rules).
#
#   integrations/prometheus/vet.sh      # from the repository's root
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "$root/integrations/prometheus" && GOWORK=off go mod download -json github.com/prometheus/prometheus |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$dir" "$work/server"
chmod -R u+w "$work/server"
cd "$work/server"
GOWORK=off GOFLAGS=-mod=mod go mod download
(cd "$root" && go build -o "$work/moirai" ./cmd/moirai)
rc=0
GOWORK=off GOFLAGS=-mod=mod "$work/moirai" vet "$@" ./promql/... ./web/api/v1/... ./tsdb/... ./storage/... ./rules/... || rc=$?
# moirai vet exits 3 when it reports findings.
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]

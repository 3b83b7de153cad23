#!/bin/sh
# Runs moirai vet on etcd's released server source (a copy of the module
# cache's, its monorepo replace directives dropped so that it builds as a
# module of its own) and prints the report; extra arguments go to moirai
# vet (e.g. -o json).
#
#   integrations/etcd/vet.sh            # from the repository's root
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "$root/integrations/etcd" && GOWORK=off go mod download -json go.etcd.io/etcd/server/v3 |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$dir" "$work/server"
chmod -R u+w "$work/server"
cd "$work/server"
for m in go.etcd.io/etcd/api/v3 go.etcd.io/etcd/client/pkg/v3 go.etcd.io/etcd/client/v3 go.etcd.io/etcd/pkg/v3; do
	GOWORK=off go mod edit -dropreplace="$m"
done
GOWORK=off GOFLAGS=-mod=mod go mod download
(cd "$root" && go build -o "$work/moirai" ./cmd/moirai)
rc=0
GOWORK=off GOFLAGS=-mod=mod "$work/moirai" vet "$@" ./storage/... ./etcdserver/... ./lease/... ./auth/... || rc=$?
# moirai vet exits 3 when it reports findings.
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]

#!/usr/bin/env bash
# scripts/check-deps.sh: adopting moirai adds nothing heavy to a user's
# module graph. It builds a fresh module outside the workspace (GOWORK=off)
# that imports the library's root package and httpmw, its go.mod pointing at
# this checkout with a replace directive, and fails if `go mod graph` names
# any module other than the consumer, moirai itself, the Go toolchain,
# golang.org/x/…, go.uber.org/goleak or github.com/google/go-cmp (the last
# two are the library's test helpers), or if the packages the consumer
# builds import anything outside the standard library, golang.org/x/… and
# moirai. It prints the graph either way.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

cat >"$dir/go.mod" <<MOD
module example.com/consumer

go 1.25.0

require github.com/moirai-go/moirai v0.0.0-00010101000000-000000000000

replace github.com/moirai-go/moirai => $repo
MOD
cat >"$dir/main.go" <<'GO'
// Command consumer is the smallest service that adopts moirai.
package main

import (
	"net/http"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

func main() {
	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
	defer ctl.Close()
	orders := ctl.Mutex("table:orders")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		if err := orders.Lock(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer orders.Unlock()
	})
	_ = httpmw.Handler(ctl, mux)
}
GO

cd "$dir"
go mod tidy
go build ./...
graph=$(go mod graph)
printf '%s\n' "$graph"

allowed='^(example\.com/consumer|github\.com/moirai-go/moirai|go|toolchain|golang\.org/x/[^@]+|go\.uber\.org/goleak|github\.com/google/go-cmp)(@|$)'
bad=$(printf '%s\n' "$graph" | tr ' ' '\n' | sort -u | grep -Ev "$allowed" || true)
deps=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... |
	grep -Ev '^(example\.com/consumer|github\.com/moirai-go/moirai(/.*)?|golang\.org/x/.*)$' || true)
if [ -n "$bad" ] || [ -n "$deps" ]; then
	[ -z "$bad" ] || printf 'check-deps: modules outside std, golang.org/x, goleak and go-cmp in the graph:\n%s\n' "$bad" >&2
	[ -z "$deps" ] || printf 'check-deps: packages built outside std, golang.org/x and moirai:\n%s\n' "$deps" >&2
	exit 1
fi
echo "check-deps: ok: $(printf '%s\n' "$graph" | wc -l) edges, none outside std, golang.org/x, goleak and go-cmp"

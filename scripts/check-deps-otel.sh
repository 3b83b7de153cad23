#!/usr/bin/env bash
# scripts/check-deps-otel.sh: adopting otelmoirai adds only OpenTelemetry
# API modules to a user's module graph. It builds, outside the workspace
# (GOWORK=off), a consumer that imports moirai, httpmw and otelmoirai (its
# go.mod pointing at this checkout with replace directives), and a twin
# that imports the same moirai packages and the OpenTelemetry API packages
# otelmoirai uses, at the versions otelmoirai requires, but not
# otelmoirai. It fails if the consumer's module graph names a module the
# twin's does not (otelmoirai itself excepted), if it names an SDK,
# exporter, contrib instrumentation, gRPC or Prometheus module, or if a
# package the consumer builds comes from a module outside the twin's
# graph, moirai and otelmoirai. It prints the difference either way.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

# The OpenTelemetry API modules otelmoirai requires, at its versions.
reqs=$(awk '/^require \(/{r=1; next} r && /^\)/{r=0} r && $1 ~ /^go\.opentelemetry\.io\// && !/\/\/ indirect/ {print $1, $2}' "$repo/otelmoirai/go.mod")
[ -n "$reqs" ] || { echo "check-deps-otel: no OpenTelemetry requirement found in otelmoirai/go.mod" >&2; exit 1; }

mkmod() { # dir, extra require lines
	mkdir -p "$1"
	{
		echo 'module example.com/consumer'
		echo
		echo 'go 1.25.0'
		echo
		echo 'require ('
		echo '	github.com/moirai-go/moirai v0.0.0-00010101000000-000000000000'
		printf '%s\n' "$reqs" | sed 's/^/\t/'
		printf '%s' "$2"
		echo ')'
		echo
		echo "replace github.com/moirai-go/moirai => $repo"
		echo "replace github.com/moirai-go/moirai/otelmoirai => $repo/otelmoirai"
	} >"$1/go.mod"
}

mkmod "$base/with" '	github.com/moirai-go/moirai/otelmoirai v0.0.0-00010101000000-000000000000
'
cat >"$base/with/main.go" <<'GO'
// Command consumer is the smallest service that adopts moirai with OpenTelemetry.
package main

import (
	"net/http"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/otelmoirai"
)

func main() {
	tel := otelmoirai.New()
	ctl := moirai.New(append(tel.ControllerOptions(), moirai.WithSLO(0.99, 50*time.Millisecond))...)
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		panic(err)
	}
	orders := ctl.Mutex("table:orders")
	mux := http.NewServeMux()
	mux.Handle("POST /orders", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := orders.Lock(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer orders.Unlock()
	})))
	_ = tel.Handler(httpmw.Handler(ctl, mux))
}
GO

mkmod "$base/twin" ''
cat >"$base/twin/main.go" <<'GO'
// Command consumer is the same service with the OpenTelemetry API but without otelmoirai.
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/log/global"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
	defer ctl.Close()
	_, span := otel.GetTracerProvider().Tracer("x").Start(context.Background(), "x")
	span.SetStatus(codes.Error, "")
	span.SetAttributes(attribute.String("k", "v"))
	var _ trace.Span = span
	var _ metric.Int64Counter = noop.Int64Counter{}
	var rec log.Record
	global.GetLoggerProvider().Logger("x").Emit(context.Background(), rec)
	_ = otel.GetMeterProvider()
	_ = httpmw.Handler(ctl, http.NewServeMux())
}
GO

nodes() { go mod graph | tr ' ' '\n' | sed 's/@.*//' | sort -u; }
(cd "$base/with" && go mod tidy && go build ./...)
(cd "$base/twin" && go mod tidy && go build ./...)
with=$(cd "$base/with" && nodes)
twin=$(cd "$base/twin" && nodes)
added=$(comm -23 <(printf '%s\n' "$with") <(printf '%s\n' "$twin"))
echo "modules otelmoirai adds to the graph of a consumer of the OpenTelemetry API:"
printf '  %s\n' $added
echo "OpenTelemetry modules in the graph:"
printf '%s\n' "$with" | grep '^go\.opentelemetry\.io/' | sed 's/^/  /'

bad=$(printf '%s\n' "$added" | grep -vx 'github.com/moirai-go/moirai/otelmoirai' || true)
heavy=$(printf '%s\n' "$with" | grep -E '^(go\.opentelemetry\.io/(otel/sdk|otel/exporters|contrib|collector)|google\.golang\.org/grpc|github\.com/prometheus)' || true)
built=$(cd "$base/with" && go list -deps -f '{{with .Module}}{{.Path}}{{end}}' ./... | sort -u |
	grep -vxF -f <(printf '%s\n' "$twin" github.com/moirai-go/moirai github.com/moirai-go/moirai/otelmoirai) || true)
if [ -n "$bad" ] || [ -n "$heavy" ] || [ -n "$built" ]; then
	[ -z "$bad" ] || printf 'check-deps-otel: modules otelmoirai adds beyond itself:\n%s\n' "$bad" >&2
	[ -z "$heavy" ] || printf 'check-deps-otel: SDK, exporter, contrib, gRPC or Prometheus modules in the graph:\n%s\n' "$heavy" >&2
	[ -z "$built" ] || printf 'check-deps-otel: packages built from modules outside the OpenTelemetry API graph:\n%s\n' "$built" >&2
	exit 1
fi
echo "check-deps-otel: ok: $(printf '%s\n' "$with" | wc -l) modules in the graph; otelmoirai adds only itself to the OpenTelemetry API's"

// Package test holds otelmoirai's tests against the OpenTelemetry SDK
// (in-memory span, metric and log exporters) and otelhttp: a module of
// its own, as OpenTelemetry's instrumentation libraries keep theirs, so
// that otelmoirai's go.mod requires the OpenTelemetry API alone and
// adding otelmoirai brings no SDK into an application's module graph.
package test

package otelmoirai

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/log/global"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures [New].
type Option func(*config)

type config struct {
	tracers trace.TracerProvider
	meters  metric.MeterProvider
	loggers log.LoggerProvider
}

// defaults is the one place the defaults live: the global providers, as
// read when [New] runs.
func defaults() config {
	return config{
		tracers: otel.GetTracerProvider(),
		meters:  otel.GetMeterProvider(),
		loggers: global.GetLoggerProvider(),
	}
}

// WithTracerProvider sets the provider of the tracer that starts the
// re-executions' spans. Default: the global one (otel.GetTracerProvider).
// Decisions are recorded on the spans the request already has, whatever
// their provider. nil keeps the default.
func WithTracerProvider(p trace.TracerProvider) Option {
	return func(c *config) {
		if p != nil {
			c.tracers = p
		}
	}
}

// WithMeterProvider sets the provider of the meter the metrics are
// recorded with. Default: the global one (otel.GetMeterProvider). nil
// keeps the default.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) {
		if p != nil {
			c.meters = p
		}
	}
}

// WithLoggerProvider sets the provider of the logger the decision events
// are emitted with. Default: the global one (global.GetLoggerProvider of
// go.opentelemetry.io/otel/log). nil keeps the default.
func WithLoggerProvider(p log.LoggerProvider) Option {
	return func(c *config) {
		if p != nil {
			c.loggers = p
		}
	}
}

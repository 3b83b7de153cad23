// Package otelmoirai is moirai's OpenTelemetry instrumentation: what the
// overload controller decides about a request shows on the request's
// trace, as metrics, and as events, in the telemetry system a service
// already runs. It depends on the OpenTelemetry API only
// (go.opentelemetry.io/otel, its trace, metric and log modules); the
// application chooses and configures the SDK.
//
// # Usage
//
//	tel := otelmoirai.New()                     // the global providers; or WithTracerProvider, …
//	ctl := moirai.New(append(tel.ControllerOptions(), moirai.WithSLO(0.99, 50*time.Millisecond))...)
//	defer ctl.Close()
//	if err := tel.Instrument(ctl); err != nil { … }
//	defer tel.Close()
//
//	mux := http.NewServeMux()
//	mux.Handle("POST /orders", tel.Handler(orders)) // inside httpmw: the task's span
//	srv := otelhttp.NewHandler(tel.Handler(httpmw.Handler(ctl, mux, httpmw.WithAdmission(d))), "server")
//
// The moirai task and the request's span are one request: httpmw begins
// the task in the request's context, where otelhttp (or otelgrpc) put
// the server span, and [Telemetry.Handler] (or [Telemetry.Track] in a
// gRPC interceptor) reads both from there. gRPC, with otelgrpc's stats
// handler and grpcmw's interceptor, chains one more unary interceptor
// after grpcmw's:
//
//	func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
//		ctx, finish := tel.Track(ctx)
//		defer finish()
//		return h(ctx, req)
//	}
//
// and, for admission's rejections, which grpcmw answers before any task
// begins, one before grpcmw's that calls [Telemetry.Rejected] when the
// handler returns grpcmw's rejection (otelmoirai/test has both).
//
// # What goes where
//
// Spans. A cancelled task's span gets the decision as attributes
// ([AttrAction], [AttrPolicy], [AttrResource], [AttrClass], [AttrGain],
// [AttrLoss], [AttrReason], [AttrOutcome], …) and an Error status whose
// description is the cancellation's cause. A penalized task's span gets
// the time it served ([AttrPenaltyServed]) and the penalty's decision. A
// request admission control rejects gets moirai.action=reject and the
// level ([AttrLevel]). A re-executed request runs under a child span,
// [ReexecutionSpanName], linked to the span of the run it replaces
// ([AttrReplaces]). The attributes are set from the task's own
// goroutine, before the task ends and before otelhttp ends the span: the
// controller records a decision before the task can see its effect, so
// [Telemetry.Track] finds it in the decision log
// (moirai.Controller.DecisionsOn) without racing the span's end.
//
// Events. Every decision, on any task (requests, background jobs,
// dry-run and skipped ones too), is emitted as a log record with event
// name [EventName] through the OpenTelemetry Logs API, with the decided
// task's context, so the SDK stamps it with the request's trace and span
// ids; its body is the reason, its attributes the span's plus the
// policy's evidence ([AttrDetails]). Why the Logs API rather than span
// events, or slog: OpenTelemetry deprecates span events in favour of
// log-based events, which is exactly a log record with an event name;
// the Logs API takes a LoggerProvider like the tracer and meter, so the
// decisions reach the application's pipeline whatever its slog handler,
// as structured events (the evidence as nested maps, not flattened text).
// The application that prefers slog gets the same correlation without
// this package's events: the controller logs each decision to
// moirai.WithLogger's logger with the decided task's context, which an
// OpenTelemetry slog bridge reads the span from.
//
// Metrics. Decisions are counted as they happen ([MetricCancellations],
// [MetricPenalties], [MetricDiagnoses], the work cancellations throw
// away in [MetricCancellationLoss], the penalties served in
// [MetricPenaltyDuration], and, when a followed task's work is over, its
// waits and holds per resource in [MetricResourceWaitDur] and
// [MetricResourceHoldDur]); the controller's state is read at collection
// time, as package metrics' Prometheus collector reads it (tasks by
// result, active tasks, per-resource waiting, usage, capacity, wait and
// hold time, re-executions by result, and with
// [Telemetry.InstrumentAdmission] an admitter's level and rejections).
// Attributes are low-cardinality only: classes (route patterns, gRPC
// methods), resource names, policies, outcomes, admitters, business
// priorities; never raw paths, keys or task ids. docs/OBSERVABILITY.md
// lists every name.
//
// Trace ids. [Telemetry.ControllerOptions] gives the controller
// [TraceID], so every decision record (the controller's log,
// moirai.Controller.Decisions, the live page of package debugpage) carries
// the W3C trace id of the decided task's request: an operator goes from a
// decision to its trace (debugpage.Config.TraceURL makes it a link).
//
// # Scope
//
// The tracer, meter and logger are named [ScopeName], at [Version]. The
// providers default to the global ones (otel.GetTracerProvider,
// otel.GetMeterProvider, global.GetLoggerProvider), read when [New] runs;
// [WithTracerProvider], [WithMeterProvider] and [WithLoggerProvider] set
// others.
package otelmoirai

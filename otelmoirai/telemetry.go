package otelmoirai

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is the OpenTelemetry instrumentation of one moirai
// controller: create it with [New], pass [Telemetry.ControllerOptions]
// to moirai.New, then tie it to the controller with
// [Telemetry.Instrument]. Its methods are safe for concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
	logger log.Logger
	inst   syncInstruments

	ctl  atomic.Pointer[moirai.Controller]
	mu   sync.Mutex
	regs []metric.Registration
}

// New returns the instrumentation, its tracer, meter and logger taken
// from the providers of the options (the global ones by default) under
// the scope [ScopeName] at [Version]. An instrument the meter refuses is
// reported to otel.Handle, as OpenTelemetry's instrumentation libraries
// do, and the others work.
func New(opts ...Option) *Telemetry {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	v := Version()
	t := &Telemetry{
		tracer: cfg.tracers.Tracer(ScopeName, trace.WithInstrumentationVersion(v)),
		meter:  cfg.meters.Meter(ScopeName, metric.WithInstrumentationVersion(v)),
		logger: cfg.loggers.Logger(ScopeName, log.WithInstrumentationVersion(v)),
	}
	var err error
	t.inst, err = newSyncInstruments(t.meter)
	if err != nil {
		otel.Handle(err)
	}
	return t
}

// ControllerOptions returns the options that connect a controller to t:
// its decisions reach t (metrics and decision events) with the decided
// task's context, and their records carry the trace id of the task's
// request ([TraceID]), which the decision log and the live page show.
// Pass them to moirai.New.
func (t *Telemetry) ControllerOptions() []moirai.Option {
	return []moirai.Option{
		moirai.WithDecisionObserverContext(t.observe),
		moirai.WithTraceID(TraceID),
	}
}

// Instrument ties t to ctl, the controller made with
// [Telemetry.ControllerOptions]: it registers the metrics that read
// ctl's state at collection time, and the spans [Telemetry.Track] and
// [Telemetry.Handler] annotate get the decisions ctl's log holds. A
// Telemetry serves one controller: tying it to the same one again does
// nothing, to a second one returns an error and changes nothing. The
// meter's refusals are returned; the instruments it accepted work.
func (t *Telemetry) Instrument(ctl *moirai.Controller) error {
	if ctl == nil {
		return errors.New("otelmoirai: Instrument with a nil controller")
	}
	if !t.ctl.CompareAndSwap(nil, ctl) {
		if t.ctl.Load() == ctl {
			return nil // tied already: its metrics are registered
		}
		return errors.New("otelmoirai: Telemetry is already tied to another controller")
	}
	cm, obs, err := newControllerMetrics(t.meter, ctl)
	return errors.Join(err, t.register(cm.observe, obs))
}

// InstrumentAdmission registers the metrics of a DAGOR admitter (the one
// given to httpmw.WithAdmission or grpcmw's), labelled with
// moirai.admitter=name: its level, its overload state, its rejections by
// business priority and its continuations.
func (t *Telemetry) InstrumentAdmission(name string, d *admit.DAGOR) error {
	if d == nil {
		return errors.New("otelmoirai: InstrumentAdmission with a nil admitter")
	}
	am, obs, err := newAdmissionMetrics(t.meter, name, d)
	return errors.Join(err, t.register(am.observe, obs))
}

func (t *Telemetry) register(cb func(context.Context, metric.Observer) error, obs []metric.Observable) error {
	live := obs[:0:0]
	for _, o := range obs {
		if o != nil {
			live = append(live, o)
		}
	}
	reg, err := t.meter.RegisterCallback(cb, live...)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.regs = append(t.regs, reg)
	t.mu.Unlock()
	return nil
}

// Close unregisters the metrics [Telemetry.Instrument] and
// [Telemetry.InstrumentAdmission] registered; the decision metrics and
// events stop with the controller. It is idempotent.
func (t *Telemetry) Close() error {
	t.mu.Lock()
	regs := t.regs
	t.regs = nil
	t.mu.Unlock()
	var err error
	for _, r := range regs {
		err = errors.Join(err, r.Unregister())
	}
	return err
}

// TraceID returns the W3C trace id of the span ctx carries (32 lowercase
// hexadecimal digits), or "" when it carries none: the function
// moirai.WithTraceID takes, for a controller built without
// [Telemetry.ControllerOptions].
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

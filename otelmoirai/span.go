package otelmoirai

import (
	"context"
	"errors"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ReexecutionSpanName is the name of the span a re-execution runs under.
const ReexecutionSpanName = "moirai.reexecution"

// Track follows the run of the task ctx carries (moirai.From), on the
// task's own goroutine, for its span: call it when the work begins,
// with the task's context, run the work with the context it returns, and
// call the returned function when the work is over, before the task ends
// (the middleware ends it after its handler returns).
//
// The span is the one ctx carries, the request's (otelhttp's, otelgrpc's)
// when the task began in its context. When the work is over, the finish
// function records on it what moirai did to the task:
//
//   - a cancelled task: the decision's attributes (moirai.action,
//     moirai.policy, moirai.resource, moirai.task.class, moirai.gain,
//     moirai.loss, moirai.reason, …) and an Error status that says
//     why;
//   - a task that served penalties: moirai.penalty.served, and the
//     penalty decision's attributes when the decision was on this task
//     (a penalty an ended task left is served by the next task of its
//     class, which records the time it served).
//
// A re-execution ([moirai.ReexecutionOf]) runs under a span of its own,
// [ReexecutionSpanName], a child of ctx's span linked to the span of the
// cancelled run it replaces; Track returns a context that carries it, and
// the finish function ends it.
//
// The finish function also records the task's waits and holds per
// resource in the [MetricResourceWaitDur] and [MetricResourceHoldDur]
// histograms (once [Telemetry.Instrument] has tied t to the controller).
//
// With no task in ctx, Track returns ctx and a function that does
// nothing. It reads the task's decisions only when the task was
// cancelled or penalized, under the controller's lock, a few
// microseconds; the common request pays a context lookup and a read of
// its task's counters.
func (t *Telemetry) Track(ctx context.Context) (context.Context, func()) {
	tk := moirai.From(ctx)
	if tk == nil {
		return ctx, func() {}
	}
	ctx, own := t.start(ctx, tk)
	return ctx, func() { t.finish(ctx, tk, own) }
}

// start begins following tk's run: a re-execution gets its own span.
func (t *Telemetry) start(ctx context.Context, tk *moirai.Task) (context.Context, trace.Span) {
	if re, ok := moirai.ReexecutionOf(ctx); ok {
		return t.startReexecution(ctx, tk, re)
	}
	return ctx, nil
}

// startReexecution starts the span of a re-execution, linked to the
// span of the run it replaces.
func (t *Telemetry) startReexecution(ctx context.Context, tk *moirai.Task, re moirai.Reexecution) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		AttrReplaces.Int64(int64(re.Replaces)),
		AttrTaskID.Int64(int64(tk.ID())),
		AttrClass.String(tk.Spec().Class),
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if !re.FirstRun.IsZero() {
		opts = append(opts, trace.WithAttributes(attribute.Float64("moirai.reexecution.since_first_run", time.Since(re.FirstRun).Seconds())))
	}
	if re.Began != nil {
		if sc := trace.SpanContextFromContext(re.Began); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrReplaces.Int64(int64(re.Replaces))}}))
		}
	}
	return t.tracer.Start(ctx, ReexecutionSpanName, opts...)
}

// finish records on the task's span what moirai did to the task, and
// ends the re-execution's own span.
func (t *Telemetry) finish(ctx context.Context, tk *moirai.Task, own trace.Span) {
	span := trace.SpanFromContext(ctx)
	if own != nil {
		defer own.End()
	}
	served := moirai.PenaltyServed(tk)
	class := tk.Spec().Class
	if served > 0 {
		t.inst.penalty.Record(ctx, served.Seconds(), metricClass(class))
	}
	ctl := t.ctl.Load()
	if ctl != nil {
		ctl.UsageOf(tk, func(res string, u task.Usage) {
			if u.Wait <= 0 && u.Hold <= 0 {
				return
			}
			opt := metric.WithAttributeSet(attribute.NewSet(AttrResource.String(res), AttrClass.String(class)))
			if u.Wait > 0 {
				t.inst.wait.Record(ctx, u.Wait.Seconds(), opt)
			}
			if u.Hold > 0 {
				t.inst.hold.Record(ctx, u.Hold.Seconds(), opt)
			}
		})
	}
	cancelled := tk.Cancelled()
	if !cancelled && served == 0 || !span.IsRecording() {
		return
	}
	var recs []policy.Record
	if ctl != nil {
		recs = ctl.DecisionsOn(tk.ID())
	}
	attrs := []attribute.KeyValue{AttrTaskID.Int64(int64(tk.ID())), AttrClass.String(class)}
	if served > 0 {
		attrs = append(attrs, AttrPenaltyServed.Float64(served.Seconds()))
		if r := pick(recs, policy.Penalize); r != nil {
			attrs = decisionAttrs(r, attrs)
		}
	}
	if cancelled {
		// The cancellation's attributes come last: they win over a
		// penalty's on the keys both set.
		r := pick(recs, policy.Cancel)
		if r != nil {
			attrs = decisionAttrs(r, attrs)
		} else {
			attrs = append(attrs, AttrAction.String(policy.Cancel.String()))
		}
		span.SetAttributes(attrs...)
		span.SetStatus(codes.Error, cancelStatus(tk, r))
		return
	}
	span.SetAttributes(attrs...)
}

// pick returns the last acted decision of action among recs, else the
// last one of that action, or nil.
func pick(recs []policy.Record, action policy.Action) *policy.Record {
	var last *policy.Record
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.Action != action {
			continue
		}
		if r.Outcome == policy.Acted {
			return r
		}
		if last == nil {
			last = r
		}
	}
	return last
}

// cancelStatus is the Error status description of a cancelled task's
// span: the cancellation's cause.
func cancelStatus(tk *moirai.Task, r *policy.Record) string {
	if cause := context.Cause(tk.Context()); cause != nil && errors.Is(cause, moirai.ErrCancelled) {
		return cause.Error()
	}
	if r != nil {
		return moirai.ErrCancelled.Error() + ": " + r.Reason
	}
	return moirai.ErrCancelled.Error()
}

// metricClass is the attribute set of a class on a metric.
func metricClass(class string) metric.MeasurementOption {
	return metric.WithAttributes(AttrClass.String(class))
}

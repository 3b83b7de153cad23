package otelmoirai

import (
	"log/slog"
	"strings"
	"time"

	"github.com/moirai-go/moirai/policy"
	"go.opentelemetry.io/otel/attribute"
)

// The attributes this package records. Spans and decision events carry
// them all; metrics only the low-cardinality ones (no task id, no reason
// text, no trace id): class, resource, policy, outcome, result, admitter,
// business priority.
const (
	// AttrAction is what moirai did to the request: cancel, penalize,
	// diagnose (a finding about a class), or reject (admission).
	AttrAction = attribute.Key("moirai.action")
	// AttrPolicy is the deciding policy (atropos, pbox, manual, tree,
	// reexecution, …): on metrics, the reason's category.
	AttrPolicy = attribute.Key("moirai.policy")
	// AttrResource is the resource the decision is about.
	AttrResource = attribute.Key("moirai.resource")
	// AttrClass is the task's class: the route pattern ("POST
	// /orders"), the gRPC method or the application's class, never a raw
	// path.
	AttrClass = attribute.Key("moirai.task.class")
	// AttrTaskID is the task's ID in its controller (spans and events
	// only), as the live page and the decision log name it.
	AttrTaskID = attribute.Key("moirai.task.id")
	// AttrGain is what the decision expects to free of the resource, in
	// seconds of the whole resource (policy.Decision.Gain).
	AttrGain = attribute.Key("moirai.gain")
	// AttrLoss is the work an acted cancellation threw away, in seconds of
	// the whole resource summed over the task's resources
	// (policy.Record.Lost).
	AttrLoss = attribute.Key("moirai.loss")
	// AttrReason is the decision's one-line explanation (spans and events
	// only).
	AttrReason = attribute.Key("moirai.reason")
	// AttrOutcome is what the controller did with the decision: acted,
	// skipped (a safety rule refused it), dry_run.
	AttrOutcome = attribute.Key("moirai.decision.outcome")
	// AttrNote says why a decision was skipped (spans and events only).
	AttrNote = attribute.Key("moirai.decision.note")
	// AttrSeq is the decision's number in the controller's log (spans
	// and events only).
	AttrSeq = attribute.Key("moirai.decision.seq")
	// AttrPenaltyDelay is a penalty decision's length, in seconds.
	AttrPenaltyDelay = attribute.Key("moirai.penalty.delay")
	// AttrPenaltyServed is the time the task spent serving penalties, in
	// seconds.
	AttrPenaltyServed = attribute.Key("moirai.penalty.served")
	// AttrLevel is the admission level ("B/U", business and user parts)
	// at which admission control rejected the request.
	AttrLevel = attribute.Key("moirai.admission.level")
	// AttrAdmitter names an admitter on the admission metrics.
	AttrAdmitter = attribute.Key("moirai.admitter")
	// AttrBusiness is a business priority (0 most important) on the
	// admission rejections metric.
	AttrBusiness = attribute.Key("moirai.priority.business")
	// AttrReplaces is, on a re-execution's span, the ID of the cancelled
	// task it replaces; the span's link points to that task's span.
	AttrReplaces = attribute.Key("moirai.reexecution.replaces")
	// AttrResult is a counter's result: ok or error for tasks;
	// reexecuted, dropped or interrupted for re-executions.
	AttrResult = attribute.Key("moirai.result")
)

// outcomeValue is the outcome's attribute value: the record's names,
// snake_case.
func outcomeValue(o policy.Outcome) string { return strings.ReplaceAll(o.String(), "-", "_") }

// decisionAttrs returns a record's attributes for a span or an event.
func decisionAttrs(r *policy.Record, dst []attribute.KeyValue) []attribute.KeyValue {
	dst = append(dst,
		AttrAction.String(r.Action.String()),
		AttrPolicy.String(r.Policy),
		AttrOutcome.String(outcomeValue(r.Outcome)),
		AttrSeq.Int64(int64(r.Seq)),
		AttrReason.String(r.Reason),
	)
	if r.Task != 0 {
		dst = append(dst, AttrTaskID.Int64(int64(r.Task)))
	}
	if c := classOf(r); c != "" {
		dst = append(dst, AttrClass.String(c))
	}
	if r.Resource != "" {
		dst = append(dst, AttrResource.String(r.Resource))
	}
	if r.Gain > 0 {
		dst = append(dst, AttrGain.Float64(r.Gain))
	}
	if r.Lost > 0 {
		dst = append(dst, AttrLoss.Float64(r.Lost))
	}
	if r.Delay > 0 {
		dst = append(dst, AttrPenaltyDelay.Float64(r.Delay.Seconds()))
	}
	if r.Note != "" {
		dst = append(dst, AttrNote.String(r.Note))
	}
	return dst
}

// classOf is the record's task's class: the one the controller read from
// the live task, else the one the policy saw.
func classOf(r *policy.Record) string {
	if r.TaskClass != "" {
		return r.TaskClass
	}
	return r.Class
}

// slogValue converts a decision's explanation (slog attributes, groups
// nested) to an attribute value: groups become maps.
func slogValue(v slog.Value) attribute.Value {
	switch v = v.Resolve(); v.Kind() {
	case slog.KindBool:
		return attribute.BoolValue(v.Bool())
	case slog.KindInt64:
		return attribute.Int64Value(v.Int64())
	case slog.KindUint64:
		return attribute.Int64Value(int64(min(v.Uint64(), 1<<63-1)))
	case slog.KindFloat64:
		return attribute.Float64Value(v.Float64())
	case slog.KindDuration:
		return attribute.StringValue(v.Duration().String())
	case slog.KindTime:
		return attribute.StringValue(v.Time().Format(time.RFC3339Nano))
	case slog.KindGroup:
		g := v.Group()
		kvs := make([]attribute.KeyValue, 0, len(g))
		for _, a := range g {
			kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(a.Key), Value: slogValue(a.Value)})
		}
		return attribute.MapValue(kvs...)
	default:
		return attribute.StringValue(v.String())
	}
}

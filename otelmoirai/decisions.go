package otelmoirai

import (
	"context"

	"github.com/moirai-go/moirai/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
)

// EventName is the event name of the log records that carry the
// controller's decisions.
const EventName = "moirai.decision"

// AttrDetails is the decision event's attribute that holds the deciding
// policy's evidence (policy.Decision.Details: contention levels,
// candidates, scores), groups as maps.
const AttrDetails = attribute.Key("moirai.decision.details")

// observe is the controller's decision observer: it counts the decision
// and emits its event, with ctx, the context the decided task was begun
// from, so that the SDK correlates both with the request's trace (an
// exemplar on the counters, the trace and span ids on the event).
func (t *Telemetry) observe(ctx context.Context, r policy.Record) {
	t.count(ctx, &r)
	t.emit(ctx, &r)
}

// count records a decision in the decision metrics. Their attributes are
// low-cardinality: the policy, the outcome, the class and the resource.
func (t *Telemetry) count(ctx context.Context, r *policy.Record) {
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrPolicy.String(r.Policy), AttrOutcome.String(outcomeValue(r.Outcome)))
	if c := classOf(r); c != "" {
		attrs = append(attrs, AttrClass.String(c))
	}
	if r.Resource != "" {
		attrs = append(attrs, AttrResource.String(r.Resource))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	switch r.Action {
	case policy.Cancel:
		t.inst.cancellations.Add(ctx, 1, opt)
		if r.Outcome == policy.Acted {
			t.inst.loss.Record(ctx, r.Lost, opt)
		}
	case policy.Penalize:
		t.inst.penalties.Add(ctx, 1, opt)
	case policy.Diagnose:
		t.inst.diagnoses.Add(ctx, 1, opt)
	}
}

// emit emits a decision as an event through the Logs API: its body the
// reason, its attributes the span's moirai.* attributes and the
// evidence. Acted cancellations and diagnoses are warnings, the rest
// information.
func (t *Telemetry) emit(ctx context.Context, r *policy.Record) {
	sev := log.SeverityInfo
	if r.Action == policy.Diagnose || r.Action == policy.Cancel && r.Outcome == policy.Acted {
		sev = log.SeverityWarn
	}
	if !t.logger.Enabled(ctx, log.EnabledParameters{Severity: sev, EventName: EventName}) {
		return
	}
	var rec log.Record
	rec.SetEventName(EventName)
	rec.SetTimestamp(r.Time)
	rec.SetSeverity(sev)
	rec.SetSeverityText(map[log.Severity]string{log.SeverityInfo: "INFO", log.SeverityWarn: "WARN"}[sev])
	rec.SetBody(attribute.StringValue(r.Reason))
	attrs := decisionAttrs(r, make([]attribute.KeyValue, 0, 16))
	if len(r.Details) > 0 {
		kvs := make([]attribute.KeyValue, 0, len(r.Details))
		for _, a := range r.Details {
			kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(a.Key), Value: slogValue(a.Value)})
		}
		attrs = append(attrs, AttrDetails.Map(kvs...))
	}
	rec.AddAttributes(attrs...)
	t.logger.Emit(ctx, rec)
}

package metrics

import (
	"github.com/moirai-go/moirai/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// Decisions counts the controller's decisions by policy, action and outcome.
// Pass its Observe method to moirai.WithDecisionObserver and register it
// with the same Registerer as the Collector. Decisions are rare, so counting
// them as they happen costs nothing on the request path.
type Decisions struct {
	v *prometheus.CounterVec
}

// NewDecisions returns an empty decision counter.
func NewDecisions() *Decisions {
	return &Decisions{v: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moirai_decisions_total",
		Help: "Controller decisions by policy, action and outcome (acted, skipped, dry-run).",
	}, []string{"policy", "action", "outcome"})}
}

// Observe counts one decision record.
func (d *Decisions) Observe(r policy.Record) {
	d.v.WithLabelValues(r.Policy, r.Action.String(), r.Outcome.String()).Inc()
}

// Describe implements prometheus.Collector.
func (d *Decisions) Describe(ch chan<- *prometheus.Desc) { d.v.Describe(ch) }

// Collect implements prometheus.Collector.
func (d *Decisions) Collect(ch chan<- prometheus.Metric) { d.v.Collect(ch) }

package metrics_test

import (
	"strings"
	"testing"

	"github.com/moirai-go/moirai/metrics"
	"github.com/moirai-go/moirai/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDecisionsCounts(t *testing.T) {
	d := metrics.NewDecisions()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d)
	d.Observe(policy.Record{Decision: policy.Decision{Policy: "atropos", Action: policy.Cancel, Task: 7}, TaskKey: "<script>", Outcome: policy.Acted})
	d.Observe(policy.Record{Decision: policy.Decision{Policy: "atropos", Action: policy.Cancel, Task: 8}, Outcome: policy.Acted})
	d.Observe(policy.Record{Decision: policy.Decision{Policy: "pbox", Action: policy.Penalize, Task: 9}, Outcome: policy.Skipped})
	want := `
# HELP moirai_decisions_total Controller decisions by policy, action and outcome (acted, skipped, dry-run).
# TYPE moirai_decisions_total counter
moirai_decisions_total{action="` + policy.Cancel.String() + `",outcome="` + policy.Acted.String() + `",policy="atropos"} 2
moirai_decisions_total{action="` + policy.Penalize.String() + `",outcome="` + policy.Skipped.String() + `",policy="pbox"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

type extra struct{ desc *prometheus.Desc }

func (e extra) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }
func (e extra) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, 3, "/orders")
}

func TestProviderIsCollected(t *testing.T) {
	ctl := newController(t)
	p := extra{prometheus.NewDesc("moirai_fence_permits", "Fence permits.", []string{"path"}, nil)}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(ctl, p))
	want := `
# HELP moirai_fence_permits Fence permits.
# TYPE moirai_fence_permits gauge
moirai_fence_permits{path="/orders"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moirai_fence_permits"); err != nil {
		t.Fatal(err)
	}
}

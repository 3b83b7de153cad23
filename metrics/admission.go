package metrics

import (
	"strconv"

	"github.com/moirai-go/moirai/admit"
	"github.com/prometheus/client_golang/prometheus"
)

// Admission exports a DAGOR admitter's level, overload state, rejections
// by business priority and continuations admitted by the grace, read at
// scrape time. name labels it
// (one per admitter, e.g. "http").
type Admission struct {
	name                            string
	d                               *admit.DAGOR
	business, user, state, rejected *prometheus.Desc
	continued                       *prometheus.Desc
}

// NewAdmission returns a collector of d's state labelled admitter=name.
func NewAdmission(name string, d *admit.DAGOR) *Admission {
	l := prometheus.Labels{"admitter": name}
	return &Admission{name: name, d: d,
		business:  prometheus.NewDesc("moirai_admission_business_level", "DAGOR admission level, business part (see admit.Level.Admits).", nil, l),
		user:      prometheus.NewDesc("moirai_admission_user_level", "DAGOR admission level, user part (see admit.Level.Admits).", nil, l),
		state:     prometheus.NewDesc("moirai_admission_overloaded", "1 when the admitter's last window was overloaded.", nil, l),
		rejected:  prometheus.NewDesc("moirai_admission_rejected_total", "Arrivals the admitter refused, by business priority (0 most important; 63 also counts arrivals without a priority). Priorities with no refusal are left out.", []string{"business"}, l),
		continued: prometheus.NewDesc("moirai_admission_continued_total", "Continuations (calls of tasks an earlier call got through) admitted only by the grace after a cut, at the level before it.", nil, l),
	}
}

// Describe implements prometheus.Collector.
func (a *Admission) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.business
	ch <- a.user
	ch <- a.state
	ch <- a.rejected
	ch <- a.continued
}

// Collect implements prometheus.Collector.
func (a *Admission) Collect(ch chan<- prometheus.Metric) {
	lv := a.d.Level()
	over := 0.0
	if a.d.Overloaded() {
		over = 1
	}
	ch <- prometheus.MustNewConstMetric(a.business, prometheus.GaugeValue, float64(lv.Business))
	ch <- prometheus.MustNewConstMetric(a.user, prometheus.GaugeValue, float64(lv.User))
	ch <- prometheus.MustNewConstMetric(a.state, prometheus.GaugeValue, over)
	ch <- prometheus.MustNewConstMetric(a.continued, prometheus.CounterValue, float64(a.d.Continued()))
	var rej [admit.BusinessLevels]int64
	a.d.RejectedInto(&rej)
	for b, n := range rej {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(a.rejected, prometheus.CounterValue, float64(n), strconv.Itoa(b))
		}
	}
}

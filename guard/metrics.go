package guard

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai/snapshot"
)

// metrics are the guard's Prometheus collectors. A nil *metrics records
// nothing.
type metrics struct {
	polls, pollFailures, skippedRows prometheus.Counter
	pollSeconds                      prometheus.Histogram
	sessions, waiters                prometheus.Gauge
	decisions, chainsLeft            *prometheus.CounterVec
	active                           prometheus.Gauge
	leaseChanges                     prometheus.Counter
	reloads                          *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, source string) (*metrics, error) {
	c := prometheus.Labels{"source": Escape(source)}
	m := &metrics{
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: "moirai_guard_polls_total",
			Help: "Polls of the server's views.", ConstLabels: c}),
		pollFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "moirai_guard_poll_failures_total",
			Help: "Polls that failed (unreachable server, query error, source panic).", ConstLabels: c}),
		skippedRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "moirai_guard_skipped_rows_total",
			Help: "View rows the source or the builder dropped as unexpected.", ConstLabels: c}),
		pollSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "moirai_guard_poll_duration_seconds",
			Help: "Time one poll took, from the guard's side.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "moirai_guard_tasks",
			Help: "Transactions and statements the last poll saw.", ConstLabels: c}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "moirai_guard_waiters",
			Help: "Sessions the last poll saw waiting for a lock.", ConstLabels: c}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "moirai_guard_decisions_total",
			Help: "Decisions by action and outcome (acted, dry-run, skipped, failed).", ConstLabels: c},
			[]string{"action", "outcome"}),
		chainsLeft: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "moirai_guard_chains_not_acted_total",
			Help: "Chains of waits left alone because their root cannot be acted on, by reason (protected, superuser, maintenance, idle, not-running, scope, no-root).", ConstLabels: c},
			[]string{"reason"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "moirai_guard_lease_held",
			Help: "1 while this replica holds the lease and acts, 0 while it stands by (see moirai_guard_lease_changes_total).", ConstLabels: c}),
		leaseChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "moirai_guard_lease_changes_total",
			Help: "Times this replica took or lost the lease.", ConstLabels: c}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "moirai_guard_reloads_total",
			Help: "Reloads of the guard's options, by result (applied, refused).", ConstLabels: c},
			[]string{"result"}),
	}
	for _, col := range []prometheus.Collector{m.polls, m.pollFailures, m.skippedRows, m.pollSeconds, m.sessions, m.waiters, m.decisions, m.chainsLeft,
		m.active, m.leaseChanges, m.reloads} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) pollFailed() {
	if m != nil {
		m.pollFailures.Inc()
	}
}

func (m *metrics) polled(obs *Observation, s *snapshot.Snapshot, ignored int) {
	if m == nil {
		return
	}
	m.polls.Inc()
	m.pollSeconds.Observe(obs.Took.Seconds())
	n := ignored
	for _, k := range obs.Skipped {
		n += k
	}
	m.skippedRows.Add(float64(n))
	m.sessions.Set(float64(len(s.Tasks)))
	w := 0
	for i := range s.Resources {
		w += s.Resources[i].Waiters
	}
	m.waiters.Set(float64(w))
}

func (m *metrics) decided(d Decision) {
	if m != nil {
		m.decisions.WithLabelValues(Escape(d.Action), Escape(d.Outcome)).Inc()
	}
}

func (m *metrics) notActed(reason string) {
	if m != nil {
		m.chainsLeft.WithLabelValues(Escape(reason)).Inc()
	}
}

func (m *metrics) leased(held, changed bool) {
	if m == nil {
		return
	}
	v := 0.0
	if held {
		v = 1
	}
	m.active.Set(v)
	if changed {
		m.leaseChanges.Inc()
	}
}

func (m *metrics) reloaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("applied").Inc()
	} else {
		m.reloads.WithLabelValues("refused").Inc()
	}
}

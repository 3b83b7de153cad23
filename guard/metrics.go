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
	in := collectors{reg: reg, labels: prometheus.Labels{"source": Escape(source)}}
	m := &metrics{
		polls:        in.counter("moirai_guard_polls_total", "Polls of the server's views."),
		pollFailures: in.counter("moirai_guard_poll_failures_total", "Polls that failed (unreachable server, query error, source panic)."),
		skippedRows:  in.counter("moirai_guard_skipped_rows_total", "View rows the source or the builder dropped as unexpected."),
		pollSeconds: in.histogram("moirai_guard_poll_duration_seconds", "Time one poll took, from the guard's side.",
			prometheus.ExponentialBuckets(0.0005, 2, 12)),
		sessions: in.gauge("moirai_guard_tasks", "Transactions and statements the last poll saw."),
		waiters:  in.gauge("moirai_guard_waiters", "Sessions the last poll saw waiting for a lock."),
		decisions: in.counterVec("moirai_guard_decisions_total", "Decisions by action and outcome (acted, dry-run, skipped, failed).",
			"action", "outcome"),
		chainsLeft: in.counterVec("moirai_guard_chains_not_acted_total", "Chains of waits left alone because their root cannot be acted on, by reason (protected, superuser, maintenance, idle, not-running, scope, no-root).",
			"reason"),
		active:       in.gauge("moirai_guard_lease_held", "1 while this replica holds the lease and acts, 0 while it stands by (see moirai_guard_lease_changes_total)."),
		leaseChanges: in.counter("moirai_guard_lease_changes_total", "Times this replica took or lost the lease."),
		reloads:      in.counterVec("moirai_guard_reloads_total", "Reloads of the guard's options, by result (applied, refused).", "result"),
	}
	if in.err != nil {
		return nil, in.err
	}
	return m, nil
}

// collectors makes the guard's collectors, each with the source's label,
// and registers them with reg in the order made, up to the first refusal
// (kept in err), so that newMetrics states each collector on one line.
type collectors struct {
	reg    prometheus.Registerer
	labels prometheus.Labels
	err    error
}

func (in *collectors) register(c prometheus.Collector) {
	if in.err == nil {
		in.err = in.reg.Register(c)
	}
}

func (in *collectors) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: in.labels})
	in.register(c)
	return c
}

func (in *collectors) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: in.labels}, labels)
	in.register(c)
	return c
}

func (in *collectors) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: in.labels})
	in.register(g)
	return g
}

func (in *collectors) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: in.labels, Buckets: buckets})
	in.register(h)
	return h
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

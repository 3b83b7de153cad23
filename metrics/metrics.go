package metrics

import (
	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
	"github.com/prometheus/client_golang/prometheus"
)

// Provider lets other mechanisms (fences, the database guard) add their own
// metrics to the collector: Describe and Collect are called with the
// collector's.
type Provider = prometheus.Collector

// Collector reads a Controller's state at scrape time.
type Collector struct {
	c         *moirai.Controller
	providers []Provider

	begun, ended, failed, cancelled *prometheus.Desc
	live, hooksRunning, bad         *prometheus.Desc
	queue, resident, untracked      *prometheus.Desc
	misuse, capacity                *prometheus.Desc
	retries, exec, wait, hold       *prometheus.Desc
	ignoredCulprits, noTrustedPeer  *prometheus.Desc
	waits, evictions                *prometheus.Desc
}

// NewCollector returns a collector of c's metrics, extended by providers.
func NewCollector(c *moirai.Controller, providers ...Provider) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("moirai_"+name, help, labels, nil)
	}
	return &Collector{
		c:               c,
		providers:       providers,
		begun:           d("tasks_begun_total", "Tasks begun."),
		ended:           d("tasks_ended_total", "Tasks ended."),
		failed:          d("tasks_failed_total", "Tasks that ended with an error."),
		cancelled:       d("tasks_cancelled_total", "Tasks cancelled by the controller."),
		live:            d("tasks_live", "Tasks begun and not ended."),
		hooksRunning:    d("cancel_hooks_running", "Cancel hooks running now."),
		bad:             d("task_anomalies_total", "Task events worth a look, by kind.", "kind"),
		queue:           d("resource_waiters", "Tasks waiting for the resource.", "resource"),
		resident:        d("resource_resident", "Units of the resource held now.", "resource"),
		untracked:       d("resource_untracked", "Units held by untracked callers.", "resource"),
		misuse:          d("resource_misuse_total", "Misuses of the resource (double release and the like).", "resource"),
		capacity:        d("resource_capacity", "The resource's capacity in units (counted resources only).", "resource"),
		exec:            d("tasks_exec_seconds_total", "Execution time of the tasks that ended."),
		wait:            d("resource_wait_seconds_total", "Time ended tasks waited for the resource. rate(this)/rate(moirai_tasks_exec_seconds_total) is its contention level C_r for locks, queues and CPU.", "resource"),
		hold:            d("resource_hold_seconds_total", "Time ended tasks held the resource.", "resource"),
		waits:           d("resource_waits_total", "Waits for the resource (for memory: misses) by ended tasks.", "resource"),
		evictions:       d("resource_evictions_total", "Units of the resource ended tasks evicted (memory).", "resource"),
		ignoredCulprits: d("tree_ignored_culprits_total", "Culprit answers of request trees the middleware ignored: from a downstream not trusted (every one when none is), malformed, naming another tree, or passed on by a handler."),
		noTrustedPeer:   d("tree_no_trusted_peer", "1 when a middleware enables request trees without trusting any peer: the tree then cancels nothing upward from this service."),
		retries:         d("retries_total", "Cancelled runs of moirai.Retry (and the middleware's re-execution), by what became of them: cancelled (all), reexecuted, dropped (objective out of reach or waited too long), interrupted (the caller gave up); budgeted (reexecuted on the objective's error budget, their hold not fitting the load) and over_budget (dropped, their hold never fitting the error budget).", "outcome"),
	}
}

// Describe implements prometheus.Collector.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.begun, m.ended, m.failed, m.cancelled, m.live,
		m.hooksRunning, m.bad, m.queue, m.resident, m.untracked, m.misuse, m.capacity, m.retries, m.ignoredCulprits, m.noTrustedPeer,
		m.exec, m.wait, m.hold, m.waits, m.evictions} {
		ch <- d
	}
	for _, p := range m.providers {
		p.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	var tot task.Totals
	m.c.Tasks().TotalsInto(&tot)
	st := m.c.Stats()
	ctr := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ctr(m.begun, float64(tot.Begun))
	ctr(m.ended, float64(tot.Ended))
	ctr(m.failed, float64(tot.Failed))
	ctr(m.cancelled, float64(st.Cancelled))
	ctr(m.exec, tot.Exec.Seconds())
	gauge(m.live, float64(st.Live))
	gauge(m.hooksRunning, float64(st.HooksRunning))
	for _, k := range []struct {
		n string
		v int64
	}{{"ended_twice", st.EndedTwice}, {"late_event", st.LateEvents}, {"bad_event", st.BadEvents},
		{"invalid_spec", st.InvalidSpecs}, {"hook_panic", st.HookPanics}, {"hook_blocked", st.HookBlocked},
		{"unended", st.Unended}} {
		ctr(m.bad, float64(k.v), k.n)
	}
	ts := m.c.TreeStats()
	ctr(m.ignoredCulprits, float64(ts.IgnoredCulprits))
	noTrust := 0.0
	if ts.NoTrustedPeer {
		noTrust = 1
	}
	gauge(m.noTrustedPeer, noTrust)
	rs := m.c.RetryStats()
	for _, k := range []struct {
		n string
		v uint64
	}{{"cancelled", rs.Cancelled}, {"reexecuted", rs.Reexecuted}, {"dropped", rs.Dropped}, {"interrupted", rs.Interrupted},
		{"budgeted", rs.Budgeted}, {"over_budget", rs.OverBudget}} {
		ctr(m.retries, float64(k.v), k.n)
	}
	for _, r := range m.c.Resources().All() {
		if r == nil {
			continue
		}
		n := r.Name()
		gauge(m.queue, float64(r.QueueLength()), n)
		gauge(m.resident, float64(r.Resident()), n)
		gauge(m.untracked, float64(r.Untracked()), n)
		ctr(m.misuse, float64(r.Misuse()), n)
		e := r.EndedTotals()
		ctr(m.wait, e.Wait.Seconds(), n)
		ctr(m.hold, e.Hold.Seconds(), n)
		ctr(m.waits, float64(e.Waits), n)
		if r.Kind() == resource.KindMemory {
			ctr(m.evictions, float64(e.Evictions), n)
		}
		if c := r.Capacity(); c > 0 { // locks have no capacity in units
			gauge(m.capacity, float64(c), n)
		}
	}
	for _, p := range m.providers {
		p.Collect(ch)
	}
}

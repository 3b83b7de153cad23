package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai/cpu"
)

// Pool exports a neighbour-aware worker pool's CPU budget and sizing (package
// cpu), read at scrape time. name labels it (one per pool).
type Pool struct {
	p                                    *cpu.Pool
	budget, limit, active, running, wait *prometheus.Desc
	share, ticks, readErrors, changes    *prometheus.Desc
	dropped, loop                        *prometheus.Desc
}

// NewPool returns a collector of p's state labelled pool=name.
func NewPool(name string, p *cpu.Pool) *Pool {
	l := prometheus.Labels{"pool": name}
	d := func(n, help string) *prometheus.Desc { return prometheus.NewDesc("moirai_cpu_"+n, help, nil, l) }
	return &Pool{p: p,
		budget:     d("budget_cpus", "The CPU budget the pool was sized from (cgroup quota, affinity or host), in CPUs."),
		limit:      d("workers_limit", "The most workers the pool runs: ⌈overcommit · budget⌉, or its fixed size."),
		active:     d("workers_active", "The workers the pool runs now (its active count)."),
		running:    d("work_running", "Work items running on a worker now."),
		wait:       d("work_waiting", "Work items waiting for a worker."),
		share:      d("share", "The process's last measured share of the host's busy CPU time (absent before the first window)."),
		ticks:      d("loop_ticks_total", "Steps of the pool's sizing loop."),
		readErrors: d("read_errors_total", "Failed reads of the CPU counters (the active count is kept)."),
		changes:    d("active_changes_total", "Changes of the active count."),
		dropped:    d("work_dropped_total", "Work items whose context ended before a worker was free."),
		loop:       d("loop_seconds_total", "Time spent in the sizing loop's steps."),
	}
}

// Describe implements prometheus.Collector.
func (m *Pool) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.budget, m.limit, m.active, m.running, m.wait, m.share, m.ticks, m.readErrors, m.changes, m.dropped, m.loop} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Pool) Collect(ch chan<- prometheus.Metric) {
	st := m.p.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	ctr := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(m.budget, st.CPUs)
	gauge(m.limit, float64(st.Limit))
	gauge(m.active, float64(st.Active))
	gauge(m.running, float64(st.Running))
	gauge(m.wait, float64(st.Waiting))
	if !math.IsNaN(st.Share) {
		gauge(m.share, st.Share)
	}
	ctr(m.ticks, float64(st.Ticks))
	ctr(m.readErrors, float64(st.ReadErrors))
	ctr(m.changes, float64(st.Changes))
	ctr(m.dropped, float64(st.Dropped))
	ctr(m.loop, st.LoopTime.Seconds())
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai/fence"
)

// Fence exports a path fence's reservations, read at scrape time: per
// path (a label from the fence's configuration, so few values) the
// permits reserved and in use, the requests running and waiting, and the
// counts of requests completed, that waited, that were rejected and that
// borrowed the path's permits; and the fence's lookups of unknown paths
// and misused releases. name labels it (one per fence).
type Fence struct {
	f                                                        *fence.Fence
	permits, inUse, running, waiting                         *prometheus.Desc
	completed, waited, rejected, lent, unknown, misuse, size *prometheus.Desc
}

// NewFence returns a collector of f's state labelled fence=name.
func NewFence(name string, f *fence.Fence) *Fence {
	l := prometheus.Labels{"fence": name}
	path := []string{"path"}
	d := func(n, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("moirai_fence_"+n, help, labels, l)
	}
	return &Fence{f: f,
		size:      d("workers", "Workers of the fence's pool.", nil),
		permits:   d("permits", "Permits reserved for the path now (local: what the paths leave).", path),
		inUse:     d("permits_in_use", "The path's permits held now, those lent to local requests included.", path),
		running:   d("running", "The path's requests running now.", path),
		waiting:   d("waiting", "The path's requests waiting for a permit now.", path),
		completed: d("completed_total", "The path's requests that released their permit.", path),
		waited:    d("waited_total", "The path's requests that had to wait for a permit.", path),
		rejected:  d("rejected_total", "The path's requests refused because its line was full.", path),
		lent:      d("lent_total", "Local requests that ran on the path's permits.", path),
		unknown:   d("unknown_paths_total", "Lookups of path names the fence does not know (served by its fallback).", nil),
		misuse:    d("misused_releases_total", "Releases of permits that were not held.", nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Fence) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.size, m.permits, m.inUse, m.running, m.waiting, m.completed, m.waited, m.rejected, m.lent, m.unknown, m.misuse} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Fence) Collect(ch chan<- prometheus.Metric) {
	s := m.f.Stats()
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(m.size, g, float64(s.Size))
	ch <- prometheus.MustNewConstMetric(m.unknown, c, float64(s.Unknown))
	ch <- prometheus.MustNewConstMetric(m.misuse, c, float64(s.Misuse))
	for _, p := range s.Paths {
		ch <- prometheus.MustNewConstMetric(m.permits, g, float64(p.Permits), p.Name)
		ch <- prometheus.MustNewConstMetric(m.inUse, g, float64(p.InUse), p.Name)
		ch <- prometheus.MustNewConstMetric(m.running, g, float64(p.Running), p.Name)
		ch <- prometheus.MustNewConstMetric(m.waiting, g, float64(p.Waiting), p.Name)
		ch <- prometheus.MustNewConstMetric(m.completed, c, float64(p.Completed), p.Name)
		ch <- prometheus.MustNewConstMetric(m.waited, c, float64(p.Waited), p.Name)
		ch <- prometheus.MustNewConstMetric(m.rejected, c, float64(p.Rejected), p.Name)
		ch <- prometheus.MustNewConstMetric(m.lent, c, float64(p.Lent), p.Name)
	}
}

// Package metrics exports a moirai Controller's state as Prometheus metrics.
//
// NewCollector returns a prometheus.Collector that reads the controller's
// existing counters at scrape time, so metrics add no cost on the request
// path. Register it with a caller-supplied prometheus.Registerer (never the
// global one). Metric names carry the moirai_ prefix, use base units and end
// counters in _total; labels are bounded (resource names, never task IDs).
package metrics

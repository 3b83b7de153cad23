package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/metrics"
)

// dashboard is the Grafana dashboard shipped for the guard and the
// library.
const dashboard = "../../deploy/grafana/moirai.json"

// TestDashboardQueriesRegisteredMetrics checks every metric name the
// dashboard queries against the names the code registers — the guard's
// (guard.New with a registry), the metrics module's collectors, and the Go
// and process collectors `moirai guard` serves — so that a renamed metric
// fails here instead of leaving an empty panel.
func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	known := registeredNames(t)
	queried := dashboardMetrics(t)
	if len(queried) < 25 {
		t.Fatalf("the dashboard queries %d metrics (%v): fewer than its panels show", len(queried), queried)
	}
	for _, name := range queried {
		if !known[name] {
			t.Errorf("the dashboard queries %s, which no code registers", name)
		}
	}
	// Every metric of the guard is on the dashboard.
	for name := range known {
		if strings.HasPrefix(name, "moirai_guard_") && !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_sum") &&
			!strings.HasSuffix(name, "_count") && !slices.Contains(queried, name) &&
			!slices.Contains(queried, name+"_bucket") {
			t.Errorf("the guard registers %s, which the dashboard does not show", name)
		}
	}
}

// registeredNames returns the names of every metric the code registers,
// histograms with their _bucket, _sum and _count series.
func registeredNames(t *testing.T) map[string]bool {
	reg := &describing{}
	g, err := guard.New(nopSource{}, guard.Options{AllDatabases: true, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	_ = g
	ctl := moirai.New()
	defer ctl.Close()
	d := admit.NewDAGOR()
	f, err := fence.New(4, []fence.Reservation{{Name: "p", Permits: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := cpu.NewPool()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, c := range []prometheus.Collector{metrics.NewCollector(ctl), metrics.NewDecisions(), metrics.NewAdmission("a", d),
		metrics.NewFence("f", f), metrics.NewPool("p", pool),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		reg.MustRegister(c)
	}
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range reg.cs {
		ch := make(chan *prometheus.Desc, 256)
		go func() { c.Describe(ch); close(ch) }()
		for desc := range ch {
			m := re.FindStringSubmatch(desc.String())
			if m == nil {
				t.Fatalf("desc %s: no name", desc)
			}
			names[m[1]] = true
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[m[1]+s] = true // for a histogram; harmless for the rest
			}
		}
	}
	return names
}

// dashboardMetrics returns the metric names the dashboard's queries use:
// every identifier of a query or variable that starts as the guard's,
// the library's, Go's or the process's metrics do (string literals, such
// as a regular expression on __name__, left out).
func dashboardMetrics(t *testing.T) []string {
	data, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var exprs []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" || key == "query" || key == "definition" {
				exprs = append(exprs, v)
			}
		}
	}
	walk(d, "")
	strs := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	ident := regexp.MustCompile(`\b(?:moirai|go|process)_[a-zA-Z0-9_:]*`)
	var out []string
	for _, e := range exprs {
		for _, name := range ident.FindAllString(strs.ReplaceAllString(e, `""`), -1) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// describing is a Registerer that keeps what is registered.
type describing struct{ cs []prometheus.Collector }

func (d *describing) Register(c prometheus.Collector) error { d.cs = append(d.cs, c); return nil }
func (d *describing) MustRegister(cs ...prometheus.Collector) {
	d.cs = append(d.cs, cs...)
}
func (d *describing) Unregister(prometheus.Collector) bool { return false }

// nopSource is a source that is never polled.
type nopSource struct{}

func (nopSource) Name() string                                     { return "postgres" }
func (nopSource) Check(context.Context) (guard.ServerInfo, error)  { return guard.ServerInfo{}, nil }
func (nopSource) Poll(context.Context) (*guard.Observation, error) { return &guard.Observation{}, nil }
func (nopSource) Cancel(context.Context, guard.Target) error       { return nil }
func (nopSource) Terminate(context.Context, guard.Target) error    { return nil }
func (nopSource) Close() error                                     { return nil }

package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/metrics"
)

// still is a host where nothing moves: the pool keeps its limit.
type still struct{}

func (still) Read() (cpu.Sample, error) { return cpu.Sample{}, nil }

func TestPoolExportsBudgetAndSizing(t *testing.T) {
	p, err := cpu.NewPool(cpu.WithBudget(3), cpu.WithOvercommit(1), cpu.WithReader(still{}), cpu.WithTick(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewPool("work", p))
	st := p.Stats()
	want := `
# HELP moirai_cpu_budget_cpus The CPU budget the pool was sized from (cgroup quota, affinity or host), in CPUs.
# TYPE moirai_cpu_budget_cpus gauge
moirai_cpu_budget_cpus{pool="work"} 3
# HELP moirai_cpu_workers_limit The most workers the pool runs: ⌈overcommit · budget⌉, or its fixed size.
# TYPE moirai_cpu_workers_limit gauge
moirai_cpu_workers_limit{pool="work"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moirai_cpu_budget_cpus", "moirai_cpu_workers_limit"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n < 10 {
		t.Fatalf("%d series (%v), want the pool's ten or eleven", n, err)
	}
	if st.Active < 1 || st.Active > 3 {
		t.Fatalf("active %d out of [1, 3]", st.Active)
	}
}

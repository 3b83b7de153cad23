package metrics_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/metrics"
)

// families gathers reg and returns the metric names with prefix, sorted.
func families(reg *prometheus.Registry, prefix string) []string {
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var names []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			names = append(names, mf.GetName())
		}
	}
	return names
}

// The controller's metrics on the caller's registry (never the global one).
// Serve it with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func ExampleCollector() {
	reg := prometheus.NewRegistry()
	ctl := moirai.New()
	defer ctl.Close()
	reg.MustRegister(metrics.NewCollector(ctl))
	fmt.Println(families(reg, "moirai_tasks_"))
	// Output: [moirai_tasks_begun_total moirai_tasks_cancelled_total moirai_tasks_ended_total moirai_tasks_exec_seconds_total moirai_tasks_failed_total moirai_tasks_live]
}

// Decisions counts the controller's decisions as it hands them to its
// observer.
func ExampleDecisions() {
	reg := prometheus.NewRegistry()
	dec := metrics.NewDecisions()
	ctl := moirai.New(moirai.WithDecisionObserver(dec.Observe))
	defer ctl.Close()
	reg.MustRegister(metrics.NewCollector(ctl), dec)
	_, t := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true})
	_ = ctl.Cancel(t.ID(), "by hand")
	t.End(nil)
	fmt.Println(families(reg, "moirai_decisions"))
	// Output: [moirai_decisions_total]
}

// Other mechanisms are Providers: NewCollector describes and collects them
// with the controller's metrics.
func ExampleProvider() {
	f, err := fence.New(8, []fence.Reservation{{Name: "payments", Permits: 2}})
	if err != nil {
		panic(err)
	}
	pool, err := cpu.NewPool(cpu.WithFixed(2))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ctl := moirai.New()
	defer ctl.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(ctl,
		metrics.NewAdmission("http", admit.NewDAGOR()),
		metrics.NewFence("upstream", f),
		metrics.NewPool("work", pool)))
	fmt.Println(len(families(reg, "moirai_admission_")) > 0, len(families(reg, "moirai_fence_")) > 0, len(families(reg, "moirai_cpu_")) > 0)
	// Output: true true true
}

// Admission exports a DAGOR admitter's level, overload flag and refusals.
func ExampleAdmission() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewAdmission("grpc", admit.NewDAGOR()))
	fmt.Println(families(reg, "moirai_admission_"))
	// Output: [moirai_admission_business_level moirai_admission_continued_total moirai_admission_overloaded moirai_admission_user_level]
}

// Fence exports a path fence's permits and waits per path.
func ExampleFence() {
	f, _ := fence.New(4, []fence.Reservation{{Name: "search", Permits: 2}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewFence("api", f))
	fmt.Println(len(families(reg, "moirai_fence_")) >= 10)
	// Output: true
}

// Pool exports a CPU-budget pool's sizing.
func ExamplePool() {
	pool, err := cpu.NewPool(cpu.WithFixed(3))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPool("work", pool))
	fmt.Println(families(reg, "moirai_cpu_workers"))
	// Output: [moirai_cpu_workers_active moirai_cpu_workers_limit]
}

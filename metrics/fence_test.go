package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/metrics"
)

func TestFenceReadsReservations(t *testing.T) {
	f, err := fence.New(10, []fence.Reservation{{Name: "d1", Permits: 4}})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := f.Acquire(context.Background(), f.Path("d1"))
	done, _ := f.Acquire(context.Background(), f.Path("d1"))
	done.Release()
	f.Path("nowhere")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewFence("grpc", f))
	want := `
# HELP moirai_fence_permits Permits reserved for the path now (local: what the paths leave).
# TYPE moirai_fence_permits gauge
moirai_fence_permits{fence="grpc",path="d1"} 4
moirai_fence_permits{fence="grpc",path="local"} 6
# HELP moirai_fence_running The path's requests running now.
# TYPE moirai_fence_running gauge
moirai_fence_running{fence="grpc",path="d1"} 1
moirai_fence_running{fence="grpc",path="local"} 0
# HELP moirai_fence_completed_total The path's requests that released their permit.
# TYPE moirai_fence_completed_total counter
moirai_fence_completed_total{fence="grpc",path="d1"} 1
moirai_fence_completed_total{fence="grpc",path="local"} 0
# HELP moirai_fence_unknown_paths_total Lookups of path names the fence does not know (served by its fallback).
# TYPE moirai_fence_unknown_paths_total counter
moirai_fence_unknown_paths_total{fence="grpc"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moirai_fence_permits", "moirai_fence_running",
		"moirai_fence_completed_total", "moirai_fence_unknown_paths_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(metrics.NewFence("grpc", f)); n != 3+2*8 {
		t.Errorf("%d series, want 19", n)
	}
	held.Release()
}

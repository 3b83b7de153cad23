package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/metrics"
	"github.com/moirai-go/moirai/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAdmissionReadsLevel(t *testing.T) {
	d := admit.NewDAGOR()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewAdmission("http", d))
	lv := d.Level()
	want := fmt.Sprintf(`
# HELP moirai_admission_business_level DAGOR admission level, business part (see admit.Level.Admits).
# TYPE moirai_admission_business_level gauge
moirai_admission_business_level{admitter="http"} %d
# HELP moirai_admission_overloaded 1 when the admitter's last window was overloaded.
# TYPE moirai_admission_overloaded gauge
moirai_admission_overloaded{admitter="http"} 0
`, lv.Business)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"moirai_admission_business_level", "moirai_admission_overloaded"); err != nil {
		t.Fatal(err)
	}
}

func TestAdmissionCountsRejectionsByBusinessPriority(t *testing.T) {
	d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10))
	for w := 0; w < 30; w++ {
		for i := 0; i < 10; i++ {
			d.AdmitPriority(0, task.Priority{})
			d.AdmitPriority(0, task.Priority{Business: 5, User: 127})
			d.Started(0, time.Second)
		}
	}
	for range 7 {
		d.AdmitPriority(0, task.Priority{Business: 5, User: 127})
	}
	var rej [admit.BusinessLevels]int64
	d.RejectedInto(&rej)
	if rej[5] < 7 || rej[0] != 0 {
		t.Fatalf("rejections %v: want business 5's and not 0's", rej[:6])
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewAdmission("grpc", d))
	want := fmt.Sprintf(`
# HELP moirai_admission_rejected_total Arrivals the admitter refused, by business priority (0 most important; 63 also counts arrivals without a priority). Priorities with no refusal are left out.
# TYPE moirai_admission_rejected_total counter
moirai_admission_rejected_total{admitter="grpc",business="5"} %d
`, rej[5])
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moirai_admission_rejected_total"); err != nil {
		t.Fatal(err)
	}
}

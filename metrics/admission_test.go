package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/metrics"
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

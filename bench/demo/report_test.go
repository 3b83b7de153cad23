package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestP99Series(t *testing.T) {
	ms := time.Millisecond
	var samples []Sample
	for i := range 100 {
		samples = append(samples, Sample{At: 10 * ms, Latency: time.Duration(i+1) * ms, OK: true})
	}
	samples = append(samples, Sample{At: 250 * ms, Latency: 7 * ms}, Sample{At: 260 * ms, Latency: 3 * ms})
	got := p99Series(samples, 100*ms)
	want := []point{{at: 0, p99: 99 * ms}, {at: 200 * ms, p99: 7 * ms}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(point{})); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	if p99Series(nil, 100*ms) != nil {
		t.Error("series of no sample not empty")
	}
}

// TestReportEscapes: keys, classes, reasons and notes are data.
func TestReportEscapes(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	s := Summary{Run: RunMoirai, Sent: 1, OK: 1, Samples: []Sample{{At: time.Second, Latency: time.Millisecond, OK: true}},
		CulpritErr: hostile,
		Decisions: []Decision{{At: time.Second, Policy: "atropos", Action: "cancel", Outcome: "acted", Class: hostile, Key: hostile,
			Reason: hostile, Note: hostile, Details: hostile}}}
	var b bytes.Buffer
	if err := WriteReport(&b, Config{Duration: 4 * time.Second, Rate: 10}, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>") {
		t.Fatalf("unescaped data in the report:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "&lt;script&gt;") {
		t.Fatal("the hostile strings are missing altogether")
	}
}

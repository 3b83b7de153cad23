package test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/metric"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/otelmoirai"
)

// recordingProvider notes every instrument its meters create: the
// names, instruments and units the code registers, whether or not a
// test makes them record.
type recordingProvider struct {
	metric.MeterProvider
	made map[string]string // name → "instrument unit"
}

func (p *recordingProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return recordingMeter{Meter: p.MeterProvider.Meter(name, opts...), made: p.made}
}

type recordingMeter struct {
	metric.Meter
	made map[string]string
}

func (m recordingMeter) Int64Counter(n string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	m.made[n] = "Counter " + metric.NewInt64CounterConfig(o...).Unit()
	return m.Meter.Int64Counter(n, o...)
}
func (m recordingMeter) Float64Histogram(n string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	m.made[n] = "Histogram " + metric.NewFloat64HistogramConfig(o...).Unit()
	return m.Meter.Float64Histogram(n, o...)
}
func (m recordingMeter) Int64ObservableCounter(n string, o ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	m.made[n] = "Counter (async) " + metric.NewInt64ObservableCounterConfig(o...).Unit()
	return m.Meter.Int64ObservableCounter(n, o...)
}
func (m recordingMeter) Float64ObservableCounter(n string, o ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	m.made[n] = "Counter (async) " + metric.NewFloat64ObservableCounterConfig(o...).Unit()
	return m.Meter.Float64ObservableCounter(n, o...)
}
func (m recordingMeter) Int64ObservableUpDownCounter(n string, o ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	m.made[n] = "UpDownCounter (async) " + metric.NewInt64ObservableUpDownCounterConfig(o...).Unit()
	return m.Meter.Int64ObservableUpDownCounter(n, o...)
}
func (m recordingMeter) Int64ObservableGauge(n string, o ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	m.made[n] = "Gauge (async) " + metric.NewInt64ObservableGaugeConfig(o...).Unit()
	return m.Meter.Int64ObservableGauge(n, o...)
}

// TestDocumentedMetrics: docs/OBSERVABILITY.md's table of otelmoirai's
// metrics names exactly the instruments the code creates, with their
// instrument kind and unit, so a rename cannot leave the page behind.
func TestDocumentedMetrics(t *testing.T) {
	s := newSDK()
	defer s.shutdown()
	rp := &recordingProvider{MeterProvider: s.mp, made: map[string]string{}}
	tel := otelmoirai.New(otelmoirai.WithMeterProvider(rp), otelmoirai.WithTracerProvider(s.tp), otelmoirai.WithLoggerProvider(s.lp))
	ctl := newController(tel, moirai.WithoutMechanisms())
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		t.Fatal(err)
	}
	if err := tel.InstrumentAdmission("http", admit.NewDAGOR()); err != nil {
		t.Fatal(err)
	}
	defer tel.Close()

	page, err := os.ReadFile("../../docs/OBSERVABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(moirai\\.[a-z_.]+)` \\| ([A-Za-z() ]+) \\| `([^`]+)` \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = strings.TrimSpace(m[2]) + " " + m[3]
	}
	if diff := cmp.Diff(rp.made, documented); diff != "" {
		t.Errorf("instruments created (-) against docs/OBSERVABILITY.md (+):\n%s", diff)
	}
	var names []string
	for n := range rp.made {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 20 {
		t.Errorf("only %d instruments created: %v", len(names), names)
	}
}

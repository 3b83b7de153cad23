package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/otelmoirai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sdk is the application's OpenTelemetry SDK, exporting to memory.
type sdk struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	logs   *logExporter
	lp     *sdklog.LoggerProvider
}

func newSDK() *sdk {
	s := &sdk{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), logs: &logExporter{}}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(s.logs)))
	return s
}

func (s *sdk) shutdown() {
	ctx := context.Background()
	_ = s.tp.Shutdown(ctx)
	_ = s.mp.Shutdown(ctx)
	_ = s.lp.Shutdown(ctx)
}

// telemetry returns otelmoirai's instrumentation on s's providers.
func (s *sdk) telemetry() *otelmoirai.Telemetry {
	return otelmoirai.New(otelmoirai.WithTracerProvider(s.tp), otelmoirai.WithMeterProvider(s.mp), otelmoirai.WithLoggerProvider(s.lp))
}

// server wraps h as an application does: otelhttp outermost.
func (s *sdk) server(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "server", otelhttp.WithTracerProvider(s.tp), otelhttp.WithMeterProvider(s.mp))
}

// metrics collects the metrics, by name.
func (s *sdk) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// serverSpan returns the ended server span of the request to path.
func (s *sdk) serverSpan(t *testing.T, path string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		if sp.SpanKind().String() == "server" && attr(sp.Attributes(), "url.path").AsString() == path {
			if found != nil {
				t.Fatalf("two server spans for %s", path)
			}
			found = sp
		}
	}
	if found == nil {
		t.Fatalf("no server span for %s among %d", path, len(s.spans.Ended()))
	}
	return found
}

// attr returns the value of key among kvs (the zero Value if absent).
func attr(kvs []attribute.KeyValue, key attribute.Key) attribute.Value {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// moiraiAttrs returns the moirai.* attributes among kvs.
func moiraiAttrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		if len(kv.Key) > 7 && kv.Key[:7] == "moirai." {
			out[kv.Key] = kv.Value
		}
	}
	return out
}

// logExporter keeps the log records exported.
type logExporter struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (e *logExporter) Export(_ context.Context, rs []sdklog.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range rs {
		e.records = append(e.records, r.Clone())
	}
	return nil
}
func (e *logExporter) Shutdown(context.Context) error   { return nil }
func (e *logExporter) ForceFlush(context.Context) error { return nil }

func (e *logExporter) all() []sdklog.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sdklog.Record(nil), e.records...)
}

// recordAttr returns the value of key among r's attributes.
func recordAttr(r *sdklog.Record, key attribute.Key) attribute.Value {
	var v attribute.Value
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		if kv.Key == key {
			v = kv.Value
			return false
		}
		return true
	})
	return v
}

// serve serves one request through h, as the server would.
func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

// newController returns a controller with tel's options and opts.
func newController(tel *otelmoirai.Telemetry, opts ...moirai.Option) *moirai.Controller {
	return moirai.New(append(tel.ControllerOptions(), opts...)...)
}

type attributeKV = attribute.KeyValue

func attributeKey(s string) attribute.Key { return attribute.Key(s) }

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func newRequest(method, path string) *http.Request { return httptest.NewRequest(method, path, nil) }

package test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/otelmoirai"
)

// A service with otelhttp, httpmw and otelmoirai. An operator cancels a
// request (Controller.Cancel, as a policy would); its server span shows
// the decision, and the cancellation counter reads it. An application
// exports to its backend where this example keeps spans and metrics in
// memory.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())

	tel := otelmoirai.New(otelmoirai.WithTracerProvider(tp), otelmoirai.WithMeterProvider(mp))
	ctl := moirai.New(append(tel.ControllerOptions(), moirai.WithoutMechanisms())...)
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		panic(err)
	}
	defer tel.Close()

	started := make(chan uint64)
	mux := http.NewServeMux()
	mux.Handle("POST /export", tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- moirai.From(r.Context()).ID()
		<-r.Context().Done() // long work, stopped by the cancellation
	})))
	srv := otelhttp.NewHandler(tel.Handler(httpmw.Handler(ctl, mux, httpmw.WithCancellable(true))), "server",
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))

	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("POST", "/export", nil))
		done <- w.Code
	}()
	if err := ctl.Cancel(<-started, "operator: export during the sale"); err != nil {
		panic(err)
	}
	fmt.Println("answer:", <-done)

	span := spans.Ended()[0]
	var attrs []string
	for _, kv := range span.Attributes() {
		switch kv.Key {
		case otelmoirai.AttrAction, otelmoirai.AttrPolicy, otelmoirai.AttrClass, otelmoirai.AttrReason, otelmoirai.AttrOutcome:
			attrs = append(attrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
		}
	}
	sort.Strings(attrs)
	fmt.Println("span status:", span.Status().Code)
	for _, a := range attrs {
		fmt.Println(" ", a)
	}
	fmt.Println("trace id in the decision log:", ctl.Decisions()[0].TraceID == span.SpanContext().TraceID().String())

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelmoirai.MetricCancellations {
				fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
			}
		}
	}
	// Output:
	// answer: 503
	// span status: Error
	//   moirai.action=cancel
	//   moirai.decision.outcome=acted
	//   moirai.policy=manual
	//   moirai.reason=operator: export during the sale
	//   moirai.task.class=POST /export
	// trace id in the decision log: true
	// moirai.cancellations 1
}

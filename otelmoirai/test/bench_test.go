package test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// BenchmarkHandler is what otelmoirai adds to a request that moirai
// leaves alone (neither cancelled nor penalized, as nearly every request
// is): baseline is otelhttp around httpmw, moirai the same with
// tel.Handler on both sides of httpmw.
func BenchmarkHandler(b *testing.B) {
	s := newSDK()
	defer s.shutdown()
	tel := s.telemetry()
	ctl := newController(tel, moirai.WithoutMechanisms())
	defer ctl.Close()
	if err := tel.Instrument(ctl); err != nil {
		b.Fatal(err)
	}
	defer tel.Close()
	orders := ctl.Mutex("table:orders")
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // takes a lock, as a handler does
		if orders.Lock(r.Context()) == nil {
			orders.Unlock()
		}
	})
	plain := http.NewServeMux()
	plain.Handle("GET /orders", ok)
	instrumented := http.NewServeMux()
	instrumented.Handle("GET /orders", tel.Handler(ok))
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"baseline", s.server(httpmw.Handler(ctl, plain))},
		{"moirai", s.server(tel.Handler(httpmw.Handler(ctl, instrumented)))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			r := httptest.NewRequest("GET", "/orders", nil)
			for b.Loop() {
				bc.h.ServeHTTP(httptest.NewRecorder(), r)
				if len(s.spans.Ended()) > 1024 {
					s.spans.Reset()
				}
			}
		})
	}
}

package httpmw_test

import (
	"net/http"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// discardWriter is a ResponseWriter that keeps nothing: the benchmark
// measures the server side, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkRequest is what the middleware adds to a request: a parallel
// GET /item/{id} through a ServeMux whose handler reads its context and
// the path value, bare (baseline) and wrapped in httpmw.Handler with its
// defaults under moirai.New's default controller (moirai), with the
// process's CPU time per request (cpu-ns/op), which a shared machine
// disturbs less than the wall clock. Run both in one run and compare:
// go test -run '^$' -bench Request -count 6 ./httpmw.
func BenchmarkRequest(b *testing.B) {
	item := func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil || r.PathValue("id") == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	for _, bc := range []struct {
		name string
		wrap func(*moirai.Controller, http.Handler) http.Handler
	}{
		{"baseline", func(_ *moirai.Controller, h http.Handler) http.Handler { return h }},
		{"moirai", func(ctl *moirai.Controller, h http.Handler) http.Handler { return httpmw.Handler(ctl, h) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctl := moirai.New(moirai.WithSLO(0.99, 50e6))
			defer ctl.Close()
			mux := http.NewServeMux()
			mux.HandleFunc("GET /item/{id}", item)
			h := bc.wrap(ctl, mux)
			b.ReportAllocs()
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				r, err := http.NewRequest(http.MethodGet, "http://example.com/item/42", nil)
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}

// reportCPU reports the process's CPU time per operation (cpu-ns/op) of
// the benchmark that defers the function it returns.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if used := processCPU() - start; start > 0 && b.N > 0 {
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
		}
	}
}

package httpmw_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// TestRequestAllocatesOnce is the claim docs/RUNTIME.md makes of a
// request through httpmw with its defaults: one allocation more than the
// bare mux (the task, with the request carrying its context in the same
// object), whatever the route's wildcards. A task's accounting block is
// reused from ended tasks once the registry's clock has ticked twice
// since they ended, so a burst faster than that allocates blocks until
// the clock ticks: the requests are counted once bursts of them have
// filled the free lists, in the steady state of a server.
func TestRequestAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	ctl := moirai.New(moirai.WithSLO(0.99, 50e6))
	defer ctl.Close()
	mux := http.NewServeMux()
	item := func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil || r.PathValue("id") == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	mux.HandleFunc("GET /item/{id}", item)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { _ = r.Context().Err() })
	h := httpmw.Handler(ctl, mux)
	w := &discardWriter{h: http.Header{}}
	for _, path := range []string{"/item/42", "/health"} {
		r, err := http.NewRequest(http.MethodGet, "http://example.com"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			for range 200 {
				h.ServeHTTP(w, r)
			}
			time.Sleep(2 * time.Millisecond)
		}
		bare := testing.AllocsPerRun(100, func() { mux.ServeHTTP(w, r) })
		wrapped := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) })
		if wrapped-bare > 1 {
			t.Errorf("%s: %.1f allocations through httpmw, %.1f bare: want at most 1 more", path, wrapped, bare)
		}
	}
}

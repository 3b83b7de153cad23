package httpmw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// TestClassWhileServed: a request's task takes its route's class once
// the mux has matched it, and whoever reads the class meanwhile sees the
// route's, never the class of no route: the controller's snapshots while
// the handler runs without touching its context, and the handler's own
// goroutines reading it while the snapshots are taken. Requests of every
// route, one at a time and several at once (run with -race: the
// snapshots read nothing the request's goroutines write).
func TestClassWhileServed(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	routes := []string{"GET /users/{id}", "/items/{id}/parts/{part...}", "POST /orders", "/static/"}
	paths := map[string][]string{
		"GET /users/{id}":             {"GET", "/users/7"},
		"/items/{id}/parts/{part...}": {"PUT", "/items/3/parts/a/b"},
		"POST /orders":                {"POST", "/orders"},
		"/static/":                    {"GET", "/static/x.css"},
	}
	want := map[string]string{
		"GET /users/{id}":             "GET /users/{id}",
		"/items/{id}/parts/{part...}": "PUT /items/{id}/parts/{part...}",
		"POST /orders":                "POST /orders",
		"/static/":                    "GET /static/",
	}
	release := make(chan struct{})
	var mu sync.Mutex
	var bad []string
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.HandleFunc(rt, func(w http.ResponseWriter, r *http.Request) {
			if rt == "POST /orders" {
				// Its own goroutines read the task's class while the
				// controller may be reading it.
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						if c := moirai.From(r.Context()).Spec().Class; c != want[rt] {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("%s: a handler's goroutine read class %q", rt, c))
							mu.Unlock()
						}
					})
				}
				wg.Wait()
			}
			<-release
		})
	}
	h := httpmw.Handler(ctl, mux)
	var served sync.WaitGroup
	for round := range 3 {
		release = make(chan struct{})
		n := 1 + round*3
		for i := range n {
			rt := routes[i%len(routes)]
			served.Go(func() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(paths[rt][0], paths[rt][1], nil))
			})
		}
		for live := 0; live < n; {
			s := ctl.Snapshot()
			live = 0
			for _, tk := range s.Tasks {
				live++
				ok := false
				for _, c := range want {
					ok = ok || tk.Class == c
				}
				if !ok {
					t.Errorf("round %d: a live request's class in a snapshot: %q, want its route's", round, tk.Class)
				}
			}
		}
		close(release)
		served.Wait()
	}
	for _, b := range bad {
		t.Error(b)
	}
}

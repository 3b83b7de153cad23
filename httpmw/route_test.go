package httpmw_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// genRoute is one route of a generated service: its pattern in the mux
// that routes it, a path that reaches it, the request's method and the
// class that is its ground truth.
type genRoute struct {
	pattern, path, method, class string
}

// genRoutes returns 2–8 routes of distinct first segments (so that no
// two conflict), with or without a method, with or without wildcards.
func genRoutes(rng *rand.Rand) []genRoute {
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	n := 2 + rng.IntN(7)
	rs := make([]genRoute, n)
	for i := range rs {
		var pat, path strings.Builder
		fmt.Fprintf(&pat, "/r%d", i)
		fmt.Fprintf(&path, "/r%d", i)
		for range rng.IntN(4) {
			switch rng.IntN(3) {
			case 0:
				fmt.Fprintf(&pat, "/{w%d}", pat.Len())
				fmt.Fprintf(&path, "/%d", rng.IntN(1e6))
			default:
				seg := fmt.Sprintf("s%d", rng.IntN(100))
				pat.WriteString("/" + seg)
				path.WriteString("/" + seg)
			}
		}
		method := methods[rng.IntN(len(methods))]
		r := genRoute{pattern: pat.String(), path: path.String(), method: method}
		if rng.IntN(2) == 0 {
			r.pattern = method + " " + r.pattern
			r.class = r.pattern
		} else {
			r.class = method + " " + r.pattern
		}
		rs[i] = r
	}
	return rs
}

// genLayout mounts mux, which routes the generated routes, in a random
// layout, as services are written: the middleware around the mux
// (always, or around a root mux that hands every path to it), then, from
// the inside out, 0–4 of: a root mux that serves the layout at "/" beside
// "/debug/"; a root mux that serves it under a prefix through
// http.StripPrefix; a middleware of the application's own; another
// moirai Handler. It returns the handler and the prefix a request's path
// gets, and describes the layout.
func genLayout(rng *rand.Rand, ctl *moirai.Controller, mux *http.ServeMux, opts func() []httpmw.Option) (http.Handler, string, string) {
	var h http.Handler
	var desc []string
	if rng.IntN(4) == 0 {
		root := http.NewServeMux()
		root.Handle("/", mux)
		root.HandleFunc("/debug/", func(http.ResponseWriter, *http.Request) {})
		h = httpmw.Handler(ctl, root, opts()...)
		desc = append(desc, "H(root{/: mux})")
	} else {
		h = httpmw.Handler(ctl, mux, opts()...)
		desc = append(desc, "H(mux)")
	}
	prefix := ""
	for range rng.IntN(5) {
		switch rng.IntN(4) {
		case 0:
			root := http.NewServeMux()
			root.Handle("/", h)
			root.HandleFunc("/debug/", func(http.ResponseWriter, *http.Request) {})
			h = root
			desc = append(desc, "root{/}")
		case 1:
			p := fmt.Sprintf("/p%d", rng.IntN(100))
			root := http.NewServeMux()
			root.Handle(p+"/", http.StripPrefix(p, h))
			h = root
			prefix = p + prefix
			desc = append(desc, "root{"+p+"/: StripPrefix}")
		case 2:
			inner := h
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-App", "1")
				inner.ServeHTTP(w, r)
			})
			desc = append(desc, "app-middleware")
		case 3:
			h = httpmw.Handler(ctl, h, opts()...)
			desc = append(desc, "H")
		}
	}
	return h, prefix, strings.Join(desc, " < ")
}

// TestClassIsTheRouteGenerated: on generated services (random routes,
// random layouts), every request's class is its route's pattern in the
// mux that routes it, whatever mux the middleware is mounted under, and
// one task serves it. Replay a failure with its seed.
func TestClassIsTheRouteGenerated(t *testing.T) {
	const layouts = 300
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	requests, bad := 0, 0
	for seed := range uint64(layouts) {
		rng := rand.New(rand.NewPCG(seed, 43))
		routes := genRoutes(rng)
		var got string
		mux := http.NewServeMux()
		for _, rt := range routes {
			mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
				got = moirai.From(r.Context()).Spec().Class
			})
		}
		opts := func() []httpmw.Option {
			if rng.IntN(3) == 0 {
				return []httpmw.Option{httpmw.WithReexecution()}
			}
			return nil
		}
		h, prefix, desc := genLayout(rng, ctl, mux, opts)
		for _, rt := range routes {
			before := begun(ctl)
			got = ""
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(rt.method, prefix+rt.path, nil))
			requests++
			if got != rt.class {
				bad++
				t.Errorf("seed %d, layout %s: %s %s: class %q (status %d); want %q", seed, desc, rt.method, prefix+rt.path, got, w.Code, rt.class)
			}
			if n := begun(ctl) - before; n != 1 {
				t.Errorf("seed %d, layout %s: %d tasks for one request", seed, desc, n)
			}
		}
	}
	t.Logf("%d layouts, %d requests: class = route in %d", layouts, requests, requests-bad)
}

// TestTwoReportsKeepTheOlderGenerated is the pgx service of a new user,
// mounted in generated layouts: a pool of 10 connections, item lookups
// (3 ms on a connection, 200/s) and fan-out reports (6 workers, queries of
// 200 ms, 1.2 s in all, reporting progress), served with re-execution. A
// second report starts when the first is half done and oversubscribes the
// pool. Whatever the layout, the older report completes without being
// cancelled, and the newcomer is cancelled (then re-executed) or delayed.
// Odd seeds leave the overload to the cancellation policy alone (no
// early action) and give every request one class, as a WithClass that
// ignores the route would: the class is mixed, and the older report is
// kept all the same.
func TestTwoReportsKeepTheOlderGenerated(t *testing.T) {
	const layouts = 24
	for seed := range uint64(layouts) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 4343))
			merged := seed%2 == 1
			ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithEarlyAction(!merged))
			defer ctl.Close()
			pool := ctl.Semaphore("db-pool", 10)
			query := func(ctx context.Context, d time.Duration) error {
				p, err := pool.Acquire(ctx, 1)
				if err != nil {
					return err
				}
				defer p.Release()
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			var cancelledRuns [2]atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("GET /item/{id}", func(w http.ResponseWriter, r *http.Request) {
				if err := query(r.Context(), 3*time.Millisecond); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
				}
			})
			mux.HandleFunc("GET /report/{n}", func(w http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(r.PathValue("n"))
				ctx := r.Context()
				const workers, queries = 6, 36
				var mu sync.Mutex
				var next, done int64
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for {
							mu.Lock()
							if next >= queries || ctx.Err() != nil {
								mu.Unlock()
								return
							}
							next++
							mu.Unlock()
							if query(ctx, 200*time.Millisecond) != nil {
								return
							}
							mu.Lock()
							done++
							moirai.From(ctx).Progress(done, queries)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if ctx.Err() != nil {
					cancelledRuns[n].Add(1)
					return // the middleware answers a cancelled run
				}
			})
			for _, name := range []string{"GET /health", "GET /users/{id}", "DELETE /cache"} {
				if rng.IntN(2) == 0 {
					mux.HandleFunc(name, func(http.ResponseWriter, *http.Request) {})
				}
			}
			h, prefix, desc := genLayout(rng, ctl, mux, func() []httpmw.Option {
				if merged {
					return []httpmw.Option{httpmw.WithReexecution(), httpmw.WithClass(func(*http.Request) string { return "GET /" })}
				}
				return []httpmw.Option{httpmw.WithReexecution()}
			})
			var wg sync.WaitGroup
			var ended [2]time.Duration
			var codes [2]int
			start := time.Now()
			report := func(n int) {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("%s/report/%d", prefix, n), nil))
				ended[n], codes[n] = time.Since(start), w.Code
			}
			wg.Go(func() { time.Sleep(200 * time.Millisecond); report(0) })
			wg.Go(func() { time.Sleep(800 * time.Millisecond); report(1) })
			for i := range 600 { // 3 s at 200/s
				time.Sleep(5 * time.Millisecond)
				wg.Go(func() {
					h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", fmt.Sprintf("%s/item/%d", prefix, i), nil))
				})
			}
			wg.Wait()
			t.Logf("seed %d, layout %s, one class %v: older report %d at %v (%d runs cancelled), newer %d at %v (%d runs cancelled)",
				seed, desc, merged, codes[0], ended[0].Round(time.Millisecond), cancelledRuns[0].Load(), codes[1], ended[1].Round(time.Millisecond), cancelledRuns[1].Load())
			if codes[0] != http.StatusOK || cancelledRuns[0].Load() != 0 {
				t.Errorf("seed %d, layout %s: the older report answered %d after %d cancelled runs; want it kept", seed, desc, codes[0], cancelledRuns[0].Load())
			}
			if cancelledRuns[1].Load() == 0 && ended[1] < ended[0]+time.Second {
				t.Errorf("seed %d, layout %s: the newer report was neither cancelled nor delayed (ended at %v, the older at %v)", seed, desc, ended[1], ended[0])
			}
		})
	}
}

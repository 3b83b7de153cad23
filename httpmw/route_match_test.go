package httpmw_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// TestServedAsTheMuxServes: the Handler serves a request on the route
// its class was matched on (a route without wildcards: without the mux
// matching it again); what the route's handler sees must be what the
// bare mux gives it. Generated
// muxes (literal, {name}, {name...}, {$} and trailing-slash patterns,
// with or without a method or a host) and requests (paths that match,
// that miss, that the mux redirects, escaped segments), each served by
// the bare mux and by the wrapped one: the same handler, r.Pattern, path
// values, status and Location. Replay a failure with its seed.
func TestServedAsTheMuxServes(t *testing.T) {
	const muxes = 400
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	words := []string{"a", "b", "item", "x%20y", "%C3%A9", "a%2Fb", "..", "."}
	requests, routed := 0, 0
	for seed := range uint64(muxes) {
		rng := rand.New(rand.NewPCG(seed, 4301))
		type seen struct {
			route, pattern string
			values         []string
		}
		var got seen
		mux := http.NewServeMux()
		var paths []string // the registered patterns' paths
		for i := range 1 + rng.IntN(6) {
			var pat strings.Builder
			var ns []string
			fmt.Fprintf(&pat, "/p%d", rng.IntN(3))
			for j := range rng.IntN(4) {
				if rng.IntN(3) == 0 {
					n := fmt.Sprintf("w%d", j)
					ns = append(ns, n)
					fmt.Fprintf(&pat, "/{%s}", n)
				} else {
					pat.WriteString("/" + []string{"a", "b", "item", "x%20y", "%C3%A9"}[rng.IntN(5)])
				}
			}
			switch rng.IntN(5) {
			case 0:
				ns = append(ns, "rest")
				pat.WriteString("/{rest...}")
			case 1:
				pat.WriteString("/")
			case 2:
				pat.WriteString("/{$}")
			}
			pattern := pat.String()
			paths = append(paths, pattern)
			switch rng.IntN(4) {
			case 0:
				pattern = "GET " + pattern
			case 1:
				pattern = "example.com" + pattern
			}
			func() {
				defer func() { _ = recover() }() // a pattern that conflicts: left out
				mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
					got = seen{route: fmt.Sprint(i), pattern: r.Pattern}
					for _, n := range ns {
						got.values = append(got.values, n+"="+r.PathValue(n))
					}
					w.WriteHeader(299)
				})
			}()
		}
		wrapped := httpmw.Handler(ctl, mux)
		for range 12 {
			var path strings.Builder
			if rng.IntN(2) == 0 {
				// A path of a registered pattern, its wildcards filled.
				for _, sg := range strings.Split(paths[rng.IntN(len(paths))], "/")[1:] {
					switch {
					case sg == "{$}":
					case sg == "{rest...}":
						for range rng.IntN(3) {
							path.WriteString("/" + words[rng.IntN(len(words))])
						}
					case strings.HasPrefix(sg, "{"):
						path.WriteString("/" + words[rng.IntN(len(words))])
					default:
						path.WriteString("/" + sg)
					}
				}
			} else {
				fmt.Fprintf(&path, "/p%d", rng.IntN(3))
				for range rng.IntN(5) {
					path.WriteString("/" + words[rng.IntN(len(words))])
				}
			}
			if path.Len() == 0 {
				path.WriteString("/")
			}
			if rng.IntN(4) == 0 {
				path.WriteString("/")
			}
			method := []string{"GET", "HEAD", "POST"}[rng.IntN(3)]
			host := []string{"example.com", "other.org"}[rng.IntN(2)]
			serve := func(h http.Handler) (seen, int, string) {
				got = seen{}
				req := httptest.NewRequest(method, "http://"+host+path.String(), nil)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return got, w.Code, w.Header().Get("Location")
			}
			want, wantCode, wantLoc := serve(mux)
			have, code, loc := serve(wrapped)
			requests++
			if wantCode == 299 {
				routed++
			}
			if fmt.Sprint(have) != fmt.Sprint(want) || code != wantCode || loc != wantLoc {
				t.Errorf("seed %d: %s http://%s%s: wrapped %+v %d %q; bare mux %+v %d %q", seed, method, host, path.String(), have, code, loc, want, wantCode, wantLoc)
			}
		}
	}
	t.Logf("%d muxes, %d requests, %d served by a route", muxes, requests, routed)
}

package httpmw

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// A request's class is the route that serves it: the pattern the
// ServeMux a Handler wraps matches. Where an option needs the class
// before the route's handler runs (otherwise see lazy.go), finding it
// costs a match, the same the mux then makes again to serve the request.
// When the match found a route without wildcards in the wrapped mux
// itself (not a mux under it), the Handler serves the request on the
// route's handler as the mux would, and the request is matched once.

// route is what muxPattern found: the handler of the route the wrapped
// mux matched, and its pattern, when the mux serving the request would
// call that handler itself (the zero value: let the mux serve it).
type route struct {
	handler http.Handler
	pattern string
}

// maxMuxDepth bounds how deep muxPattern follows muxes routing to muxes.
const maxMuxDepth = 8

// muxPattern is the pattern of the route that serves r in the ServeMux
// this Handler wraps, following a route whose handler is itself a
// ServeMux to the route that one matches; "" when the Handler wraps no
// ServeMux or none matches. An outer mux's r.Pattern is not it: the
// route is where the request ends up, not where it was mounted. The
// route is set when the wrapped mux's own route serves r.
func (h *handler) muxPattern(r *http.Request) (string, route) {
	var pattern string
	var rt route
	mux := h.mux
	for depth := range maxMuxDepth {
		if mux == nil {
			break
		}
		next, p := mux.Handler(r)
		if p == "" {
			break
		}
		pattern = p
		mux, _ = next.(*http.ServeMux)
		if depth == 0 && mux == nil {
			rt = route{handler: next, pattern: p}
		}
	}
	return pattern, rt
}

// serve serves r with next, on rt's handler when the mux has already
// matched it to a pattern without wildcards: the mux would set
// r.Pattern and call that handler, and a route without wildcards has no
// path values to set. A pattern with wildcards is matched again by the
// mux, which alone can give the handler its path values without an
// allocation.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, rt route) {
	if rt.handler == nil || r.RequestURI == "*" || strings.IndexByte(rt.pattern, '{') >= 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	r.Pattern = rt.pattern
	rt.handler.ServeHTTP(w, r)
}

// classCache keeps the class of each method and pattern without a method
// served ("GET" and "/users/{id}" make "GET /users/{id}"), so that a
// request's class is not a string built anew each time. Patterns are the
// routes', and methods RFC 9110's or OTHER, so the pairs are few; past
// maxCachedClasses, classes are built and not kept. The zero value is
// ready to use.
type classCache struct {
	m sync.Map // classKey → string
	n atomic.Int32
}

type classKey struct{ method, pattern string }

// maxCachedClasses bounds a classCache.
const maxCachedClasses = 1024

// class is routeClass(method, pattern), kept.
func (c *classCache) class(method, pattern string) string {
	if pattern == "" || strings.IndexByte(pattern, ' ') >= 0 {
		return routeClass(method, pattern) // no string to build
	}
	k := classKey{routeMethod(method), pattern}
	if v, ok := c.m.Load(k); ok {
		return v.(string)
	}
	class := k.method + " " + pattern
	if c.n.Add(1) <= maxCachedClasses {
		c.m.Store(k, class)
	}
	return class
}

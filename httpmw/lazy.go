package httpmw

import (
	"math/bits"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/moirai-go/moirai"
)

// A request's class is the route that serves it, and finding the route
// costs a match of the request, which the wrapped mux then makes again
// to serve it: net/http sets a handler's path values only from a match
// of its own. When nothing the Handler does before the route's handler
// runs needs the class (lazyOK), the request's task begins with the
// class of no route (the request's method) and the mux serves the
// request at once, matching it once; the task's class is learnt when
// something first reads it (taskx.Resolver), and a task nothing read
// ends without it:
//
//   - on a goroutine of the request's work (the handler reads its task
//     with moirai.From, or acquires through an instrumented primitive),
//     from the pattern the mux set in the request it served: the route
//     of the innermost of the muxes routing to muxes, as the match would
//     give it. A pattern is trusted once a match has given the same for
//     a request that carried it (a handler behind middleware of the
//     application's own may serve the request with a mux of its own,
//     which sets its own pattern), so a route's requests are matched
//     once, its first;
//   - anywhere else (the controller's snapshots, the live page, which
//     must not read what the request's goroutine writes), from a match
//     of the request as it came.

// lazyOK reports whether h may begin its requests' tasks before their
// class is known: it wraps a ServeMux, and no option needs the class
// before the route's handler runs (WithClass, a fence, a tree,
// re-execution, an objective or a background mark of some classes).
func (h *handler) lazyOK() bool {
	c := &h.cfg
	return h.mux != nil && c.class == nil && c.Fence == nil && !c.Tree && !c.reexecute && !c.Routes.PerClass()
}

// Resolve is the spec of the request's task (taskx.Resolver).
func (a *answer) Resolve(base *moirai.Spec, own bool) *moirai.Spec {
	h := a.lazyH
	if !own {
		pattern, _ := h.muxPattern(a.in)
		return h.specs.of(base, h.patternClass(a.in.Method, pattern), a.in.Method, pattern, false)
	}
	r := a.served
	if sp := h.specs.lookup(base, r.Method, r.Pattern); sp != nil {
		return sp
	}
	pattern, _ := h.muxPattern(r)
	return h.specs.of(base, h.patternClass(r.Method, pattern), r.Method, pattern, pattern != "" && pattern == r.Pattern)
}

// specCache keeps, per route pattern, the spec of a lazy task of the
// route, shared by the tasks whose specs are the same (most: they differ
// only by their key or priority, when options set those): a task's spec
// costs no allocation. It is a table of specCacheSlots entries, a
// pattern's slot chosen by the address of its text, which is the same
// string for every request of a route (the mux sets the route's own):
// reading it costs a few loads, where a map would hash the pattern. Two
// routes sharing a slot take it in turn; a pattern not found is matched
// again (Resolve). The zero value is ready to use.
type specCache struct {
	slots [specCacheSlots]atomic.Pointer[routeSpec]
}

// specCacheSlots is the size of a specCache: a power of two.
const specCacheSlots = 128

// routeSpec is a specCache's entry: the spec of the requests of method
// (as the request names it; "" for a pattern that names its method)
// served by pattern.
type routeSpec struct {
	pattern, method string
	spec            *moirai.Spec
}

// slot is the slot of pattern.
func (c *specCache) slot(pattern string) *atomic.Pointer[routeSpec] {
	h := uint64(uintptr(unsafe.Pointer(unsafe.StringData(pattern)))) * 0x9E3779B97F4A7C15
	return &c.slots[h>>(64-bits.TrailingZeros(specCacheSlots))]
}

// lookup returns the kept spec of the requests of method served by
// pattern if it is base but for its class, else nil.
func (c *specCache) lookup(base *moirai.Spec, method, pattern string) *moirai.Spec {
	e := c.slot(pattern).Load()
	if e == nil || e.pattern != pattern || (e.method != "" && e.method != method) || !sameBut(e.spec, base) {
		return nil
	}
	return e.spec
}

// of returns base with class, the class of a request of method served
// by pattern: the kept spec when it is the same, else a new one, kept
// when pattern is trusted (keep).
func (c *specCache) of(base *moirai.Spec, class, method, pattern string, keep bool) *moirai.Spec {
	m := method
	if strings.IndexByte(pattern, ' ') >= 0 {
		m = ""
	}
	if sp := c.lookup(base, m, pattern); sp != nil && sp.Class == class {
		return sp
	}
	sp := new(moirai.Spec)
	*sp = *base
	sp.Class = class
	if keep {
		c.slot(pattern).Store(&routeSpec{pattern: pattern, method: m, spec: sp})
	}
	return sp
}

// sameBut reports whether a and b, normalized specs (a task's), are the
// same but for their class. A normalized spec's Goal is its MaxDeferral.
// TestSameButComparesEveryField fails when a field of moirai.Spec is not
// compared.
func sameBut(a, b *moirai.Spec) bool {
	return a.Key == b.Key && a.Kind == b.Kind && a.Cancellable == b.Cancellable && a.Priority == b.Priority &&
		a.Path == b.Path && a.Tree == b.Tree && a.MaxDeferral == b.MaxDeferral && a.Objective == b.Objective
}

package httpmw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/internal/taskx"
)

// Option configures [Handler].
type Option func(*config)

type config struct {
	// The settings that mean the same in grpcmw: cancellability,
	// objectives and background classes, the exposed cause, the classes
	// safe to run twice, admission, the fence, the tree. An inner Handler
	// also applies the per-route ones to the task an outer one began (see
	// the package documentation, "Nesting").
	mwx.Server

	class     func(*http.Request) string
	key       func(*http.Request) string // nil: no key
	reexecute bool
	retry     []moirai.RetryOption
	maxBody   int64
	arrival   func(*http.Request) (time.Time, bool)
	priority  func(*http.Request) moirai.Priority
	trusted   func(*http.Request) bool
	pathOf    func(*http.Request) string
	idemKey   string // the Idempotency-Key header the application honours, "" for none
	keySet    bool
}

// maxClass bounds the length of a class derived from a request.
const maxClass = 128

func defaults() config {
	return config{Server: mwx.DefaultServer(), maxBody: 1 << 20}
}

// WithClass sets how a request's class is derived. The class groups
// requests whose durations are alike; the controller learns them per
// class, and a fence's classifier learns a path per class, so keep the
// number of classes small: route patterns, never raw paths with IDs in
// them (a client choosing its paths would choose the classes). A class
// is cut to 128 bytes.
//
// The default is the pattern of the route that serves the request: the
// one the ServeMux the middleware wraps matches (and, when that route's
// handler is itself a ServeMux, the one it matches, and so on), whatever
// an outer mux the middleware is mounted under set in
// http.Request.Pattern; or, when the middleware wraps a handler other
// than a ServeMux, the pattern of the route it is mounted on. A Handler
// nested in another of the same controller that wraps a ServeMux refines
// the outer one's class to its own mux's route (see the package
// documentation, "Nesting"). A pattern without a method gets the
// request's method in front ("GET /users/{id}"; a method outside RFC
// 9110's becomes "OTHER"). A request no pattern serves (no route matched,
// or no mux anywhere) has the class of its method alone. Where the
// middleware cannot see the routing mux (it wraps other middleware that
// wraps the mux), the route it is mounted on may serve requests of
// different weights: the controller notices a class whose tasks' holds
// differ by orders of magnitude and stops trusting its history (see
// moirai's CANCELLATION.md), but a WithClass, or a Handler around the mux
// itself, keeps the classes right.
func WithClass(fn func(*http.Request) string) Option {
	return func(c *config) { opt.Set(&c.class, fn, fn != nil) }
}

// WithKey sets how a request's key (a client, a tenant) is derived.
// Default: none.
func WithKey(fn func(*http.Request) string) Option {
	return func(c *config) {
		if fn != nil {
			c.key, c.keySet = fn, true
		}
	}
}

// WithCancellable sets whether the controller may cancel the requests
// (default true).
func WithCancellable(on bool) Option {
	return func(c *config) { c.SetCancellable(on) }
}

// WithObjective sets the latency objective of the requests of the given
// classes (see [WithClass]), or of every request the Handler serves when
// no class is given: the controller's detector counts such a request late
// past d rather than past the process-wide objective (moirai.WithSLO,
// which stays the default, for the quantile that sets). d =
// moirai.NoObjective gives them none: their latency never counts as a
// miss, so their misses never make the controller act, though they may
// still be cancelled. A class's own objective wins over the Handler's; a
// later option for the same class wins over an earlier one. Negative
// durations other than NoObjective are ignored.
func WithObjective(d time.Duration, classes ...string) Option {
	return func(c *config) { c.SetObjective(d, classes) }
}

// WithBackground marks the requests of the given classes, or every
// request the Handler serves when no class is given, as background work
// (moirai.Background): nobody waits on them against an objective, so they
// are never counted as late (their misses never trigger detection), and a
// cancellable background request is cancelled before any foreground one
// that would free the contended resource. Use it for routes such as a
// report or an export that may take seconds and may be retried later.
func WithBackground(classes ...string) Option {
	return func(c *config) { c.SetBackground(classes) }
}

// WithExposedCause makes the body of the 503 that answers a request the
// controller cancelled carry the cancellation's reason (the text of
// context.Cause of the request's context) after "server overloaded".
// Without it, the body says only that the server is overloaded, as a
// client outside the service should see: the reason names the service's
// classes, resources and numbers. The application reads the reason from
// context.Cause either way.
func WithExposedCause() Option { return func(c *config) { c.SetExposedCause() } }

// WithReexecution makes a request that the controller cancels, and whose
// handler gave up (returned without answering, or answered 5xx), run
// again once, when the resources it used are free (see the package
// documentation, "Re-execution", and moirai.Retry, to which opts are
// passed). Only requests that are safe to run twice are re-executed: those
// of the idempotent methods of RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE), those of the classes [WithReexecutable] names, and those that
// carry the idempotency key the application honours
// ([WithIdempotencyKey]). Any other request is served as without
// re-execution: cancelled, it is answered 503 and runs once. A run whose
// handler answered (a status below 500) keeps its answer, whatever
// happened to its context afterwards.
//
// The client's wait is bounded: a re-execution that cannot be expected
// to end within the request's objective (its route's [WithObjective], or
// the controller's, counted from the first run's start) is not started,
// unless opts bound the wait explicitly (moirai.RetryMaxWait, which
// replaces the objective as the bound, or moirai.RetryWithin); a request
// not re-executed in time is answered 503 with its class's expected wait
// as Retry-After.
func WithReexecution(opts ...moirai.RetryOption) Option {
	return func(c *config) {
		c.reexecute = true
		c.retry = opts
	}
}

// WithReexecutable marks the requests of the given classes (see
// [WithClass]), or every request the Handler serves when no class is
// given, as safe to run twice whatever their method, as a handler that
// does its work in one database transaction is (a cancelled transaction
// rolled back): [WithReexecution] re-executes them too. Use it only for
// such handlers: a POST that inserts outside a transaction would insert
// twice.
func WithReexecutable(classes ...string) Option {
	return func(c *config) { c.SetReexecutable(classes) }
}

// WithIdempotencyKey says that the application honours header (""
// means "Idempotency-Key"): given a request it has already served with
// the same key, it answers what it answered then without doing the work
// again. [WithReexecution] then re-executes a request of any method that
// carries one non-empty value of header. The application must honour the
// key for a run that was cancelled too (a second run with the key of a
// first that rolled back does the work).
func WithIdempotencyKey(header string) Option {
	return func(c *config) {
		if header == "" {
			header = "Idempotency-Key"
		}
		c.idemKey = http.CanonicalHeaderKey(header)
	}
}

// reexecutable reports whether a request of class is safe to run twice:
// an idempotent method of RFC 9110, a class marked re-executable, or an
// idempotency key the application honours.
func (c *config) reexecutable(r *http.Request, class string) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete, "":
		return true
	}
	if c.SafeTwice.Has(class) {
		return true
	}
	if c.idemKey != "" {
		v := r.Header[c.idemKey]
		return len(v) == 1 && v[0] != ""
	}
	return false
}

// WithMaxBody bounds the request body buffered for re-execution (default
// 1 MiB). A request with a larger body is served without re-execution.
func WithMaxBody(n int64) Option {
	return func(c *config) { opt.Set(&c.maxBody, n, n >= 0) }
}

// WithFence runs every request on a permit of c's fence, on the
// reservation of its path: the path c has learnt for the request's class
// (see [WithClass]) from the downstream calls its handler makes through
// [Transport] with the request's context, or the local reservation for a
// class seen calling nothing. A request whose path's line is full gets
// 503 Service Unavailable with Retry-After.
func WithFence(c *fence.Classifier) Option { return func(cf *config) { cf.SetFence(c) } }

// WithPathOf sets a request's path itself, by name, instead of the
// classifier's learning (WithFence); "" means the classifier decides. A
// name the fence does not know gets its fallback reservation.
func WithPathOf(fn func(*http.Request) string) Option { return func(c *config) { c.pathOf = fn } }

// Handler returns next wrapped so that each request is a moirai task of
// ctl. It panics if ctl or next is nil, as http.Handle does for a nil
// handler.
func Handler(ctl *moirai.Controller, next http.Handler, opts ...Option) http.Handler {
	if ctl == nil || next == nil {
		panic("httpmw: nil controller or handler")
	}
	cfg := defaults()
	mwx.Apply(&cfg, opts)
	if cfg.Tree && cfg.trusted == nil {
		mwx.NoTrustedPeer(ctl, fmt.Sprintf("httpmw: WithTree(%q) without WithTrustedPeer: no caller is trusted, so every request is the root of a tree of its own and no culprit answer goes back to a caller", cfg.Hop))
	}
	mux, _ := next.(*http.ServeMux)
	h := &handler{ctl: ctl, next: next, mux: mux, cfg: cfg}
	h.lazy = h.lazyOK()
	return h
}

type handler struct {
	ctl    *moirai.Controller
	next   http.Handler
	mux    *http.ServeMux // next, when it is one: where the default class comes from
	cfg    config
	routes classCache // the classes of the routes served
	lazy   bool       // a request's task begins before its class is known (lazy.go)
	specs  specCache  // the specs of the lazy tasks, by route
}

func (h *handler) spec(r *http.Request, class string, p moirai.Priority, tr string) moirai.Spec {
	sp := moirai.Spec{Class: class, Kind: moirai.Request, Cancellable: h.cfg.Cancellable, Priority: p, Tree: tr}
	if h.cfg.key != nil {
		sp.Key = h.cfg.key(r)
	}
	h.cfg.Apply(&sp, class)
	return sp
}

// refined is the spec of outer, a task an outer Handler began, with this
// Handler's own options applied: the class when WithClass is given, the
// key when WithKey is, the cancellability when WithCancellable is, the
// objective and kind of the resulting class.
func (h *handler) refined(r *http.Request, outer *moirai.Task) moirai.Spec {
	sp := outer.Spec()
	if h.cfg.class != nil {
		sp.Class, _ = h.classOf(r)
	} else if pattern, _ := h.muxPattern(r); pattern != "" {
		sp.Class = clipClass(h.routes.class(r.Method, pattern))
	}
	if h.cfg.keySet {
		sp.Key = h.cfg.key(r)
	}
	if h.cfg.CancellableSet {
		sp.Cancellable = h.cfg.Cancellable
	}
	h.cfg.Apply(&sp, sp.Class)
	return sp
}

// classOf is r's class: WithClass's, or its route's pattern; and, when
// the route was matched in the ServeMux this Handler wraps, the match.
func (h *handler) classOf(r *http.Request) (string, route) {
	var c string
	var rt route
	if h.cfg.class != nil {
		c = h.cfg.class(r)
	} else {
		var pattern string
		pattern, rt = h.muxPattern(r)
		if pattern == "" && h.mux == nil {
			pattern = r.Pattern // the route this Handler is mounted on
		}
		return h.patternClass(r.Method, pattern), rt
	}
	return clipClass(c), rt
}

// patternClass is the class of a request of method served by pattern.
func (h *handler) patternClass(method, pattern string) string {
	return clipClass(h.routes.class(method, pattern))
}

func clipClass(c string) string {
	if len(c) > maxClass {
		c = c[:maxClass]
	}
	return c
}

// routeMethod is method as a class names it: RFC 9110's, or OTHER.
func routeMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	case "":
		return http.MethodGet
	}
	return "OTHER"
}

// routeClass is the class of a request of method served by pattern.
func routeClass(method, pattern string) string {
	if strings.IndexByte(pattern, ' ') >= 0 {
		return pattern // the pattern names its method
	}
	method = routeMethod(method)
	if pattern == "" {
		return method
	}
	return method + " " + pattern
}

func (h *handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	// Every answer to r, the handler's or the middleware's, goes through w.
	w := newAnswer(rw, h.ctl)
	h.serveAnswer(w, r)
	// Not deferred: the answer of a handler that panicked is left to the
	// collector rather than pooled, and a request served to its end pays
	// for no deferred call.
	w.release()
}

// serveAnswer serves r, every answer to it going through w.
func (h *handler) serveAnswer(w *answer, r *http.Request) {
	p := h.priorityOf(r)
	if h.cfg.Dagor != nil && !h.admitRequest(w, r, p) {
		return
	}
	// Nested in a Handler of the same controller: one request, one task.
	outer := moirai.From(r.Context())
	if outer != nil && taskx.Owner(outer) == h.ctl.Tasks() && !taskx.Ended(outer) {
		h.serveOn(w, r, outer)
		return
	}
	if h.lazy {
		// The class is the route's, read once the mux has matched r
		// (lazy.go); until then, the class of no route.
		w.lazyH, w.in = h, r
		h.serveTask(w, r, route{}, routeMethod(r.Method), p, "", false)
		return
	}
	class, rt := h.classOf(r) // rt: the wrapped mux's match, when it made one
	if h.cfg.Fence != nil {
		permit, ok := h.fenced(w, r, class)
		if !ok {
			return
		}
		defer permit.Release()
		r = r.WithContext(fence.WithCaller(r.Context(), h.cfg.Fence, class))
	}
	var tr string
	var treeIn bool
	if h.cfg.Tree {
		tr, treeIn = h.treeOf(r, class)
	}
	// A request of a received tree is not re-executed here: its culprit
	// answer goes up, and the tree's root re-executes it, after the wait.
	if h.cfg.reexecute && h.cfg.Cancellable && !treeIn && h.cfg.reexecutable(r, class) {
		if body, ok := h.bufferBody(r); ok {
			h.serveRetry(w, r, body, class, p, tr)
			return
		}
	}
	h.serveTask(w, r, rt, class, p, tr, treeIn)
}

// serveTask serves r, of class, priority p and tree tr, as a task it
// begins and ends, on rt when the wrapped mux matched it.
func (h *handler) serveTask(w *answer, r *http.Request, rt route, class string, p moirai.Priority, tr string, treeIn bool) {
	var pend *taskx.Pending
	if w.lazyH != nil {
		w.pend.R = w
		pend = &w.pend
	}
	// The request carrying the task's context is allocated with the task:
	// one object, which lives as long as the task's context may.
	ctx, t, rc := taskx.BeginWith[http.Request](h.ctl.Tasks(), r.Context(), h.spec(r, class, p, tr), pend)
	if h.cfg.Tree {
		w.tree, w.ctx, w.treeIn = h, ctx, treeIn
	}
	// One deferred call, open-coded by the compiler (this function has
	// few exits): it ends the task of a handler that panicked too.
	err := errPanicked
	defer func() { t.End(err) }()
	*rc = *r.WithContext(ctx) // inlined: the copy WithContext makes stays on the stack
	r = rc
	if w.lazyH != nil {
		r.Pattern, w.served = "", r // the mux serving r sets it
	}
	h.serve(w, r, rt)
	if cause := context.Cause(ctx); cause != nil || w.status >= 500 {
		err = outcome(cause, w.status)
		if w.status == 0 && errors.Is(cause, moirai.ErrCancelled) {
			h.answerCancelled(w, ctx, t)
			return
		}
	} else {
		err = nil
	}
	w.finish()
}

// answerCancelled answers a request whose task t the controller
// cancelled and whose handler left it unanswered.
func (h *handler) answerCancelled(w *answer, ctx context.Context, t *moirai.Task) {
	// An inner Handler may have refined the task's class.
	class := taskx.Settled(t).Spec().Class
	if h.cfg.Tree {
		if cu, ok := h.ctl.CulpritAnswer(ctx, h.cfg.Hop); ok {
			rejectCulprit(w, h.ctl, class, cu)
			return
		}
	}
	h.rejectCancelled(w, ctx, class)
}

// serveOn serves r, nested in a Handler of the same controller that began
// outer, the request's one task: it takes a permit of the fence, when
// this Handler has one, for the refined class, and serves r on outer.
func (h *handler) serveOn(w *answer, r *http.Request, outer *moirai.Task) {
	sp := h.refined(r, outer)
	if h.cfg.Fence != nil {
		permit, ok := h.fenced(w, r, sp.Class)
		if !ok {
			return
		}
		defer permit.Release()
		r = r.WithContext(fence.WithCaller(r.Context(), h.cfg.Fence, sp.Class))
	}
	h.serveNested(w, r, outer, sp)
}

// serveNested serves a request whose task outer an outer Handler of the
// same controller began: it refines outer to sp (this Handler's own
// options) and serves the request on it, re-executing it when this
// Handler says so. The outer Handler ends the task; this one answers a
// cancelled request that its handler left unanswered, with its own
// options.
func (h *handler) serveNested(w *answer, r *http.Request, outer *moirai.Task, sp moirai.Spec) {
	taskx.Refine(outer, sp) // refused when already cancelled: nothing left to refine
	if h.cfg.reexecute && sp.Cancellable && !outer.Cancelled() && r.Context().Value(retryingKey{}) == nil &&
		h.cfg.reexecutable(r, sp.Class) {
		if body, ok := h.bufferBody(r); ok {
			h.serveRetryOn(w, r, body, outer)
			return
		}
	}
	h.next.ServeHTTP(w, r)
	if w.status == 0 && errors.Is(context.Cause(r.Context()), moirai.ErrCancelled) {
		h.rejectCancelled(w, r.Context(), outer.Spec().Class)
		return
	}
	w.finish()
}

// fenced takes a permit of the fence for r, of class; it reports false
// after answering a request the fence rejects (or nothing to a client
// that has gone).
func (h *handler) fenced(w *answer, r *http.Request, class string) (fence.Permit, bool) {
	permit, err := h.cfg.Fence.Fence().Acquire(r.Context(), h.path(r, class))
	if err != nil {
		if errors.Is(err, fence.ErrRejected) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "overloaded: path's line full", http.StatusServiceUnavailable)
		}
		// Otherwise the client has gone: nobody to answer.
		return fence.Permit{}, false
	}
	return permit, true
}

// path is the fence reservation of a request of class.
func (h *handler) path(r *http.Request, class string) *fence.Path {
	if h.cfg.pathOf != nil {
		if name := h.cfg.pathOf(r); name != "" {
			return h.cfg.Fence.Fence().Path(name)
		}
	}
	return h.cfg.Fence.PathOf(class)
}

// errPanicked ends the task of a handler that panicked; net/http then
// recovers the panic as it would without the middleware.
var errPanicked = errors.New("httpmw: handler panicked")

// outcome is the error a task ends with: the cancellation's cause (cause
// is context.Cause of its context), or a server error status.
func outcome(cause error, status int) error {
	if errors.Is(cause, moirai.ErrCancelled) {
		return cause
	}
	if status >= 500 {
		return fmt.Errorf("httpmw: status %d", status)
	}
	return nil
}

// bufferBody reads r's body into memory for a re-executable request. It
// reports false, restoring the body, when it is larger than allowed.
func (h *handler) bufferBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength > h.cfg.maxBody {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.maxBody+1))
	if err != nil || int64(len(b)) > h.cfg.maxBody {
		// Serve it as it comes: what was read, then the rest (or the error).
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), errReader{err}, r.Body), r.Body}
		return nil, false
	}
	r.Body.Close()
	return b, true
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// retryingKey marks the context of a run that a Handler re-executes when
// it is cancelled: a Handler nested in it leaves the re-execution to that
// one rather than re-executing the same work twice.
type retryingKey struct{}

// errDiscarded is what a cancelled run's function returns: its buffered
// answer is thrown away and moirai.Retry decides what happens next.
var errDiscarded = errors.New("httpmw: cancelled run discarded")

func (h *handler) serveRetry(w *answer, r *http.Request, body []byte, class string, p moirai.Priority, tr string) {
	var final *bufferedWriter
	run := func(ctx context.Context) error {
		return h.serveRun(ctx, r, body, &final)
	}
	err := moirai.Retry(r.Context(), h.ctl, h.spec(r, class, p, tr), run, h.cfg.retry...)
	h.answerRetry(w, r.Context(), final, err, class)
}

// serveRun serves one run of the re-executable request r (its body
// buffered) on ctx, into a buffer; a run that is kept is left in *final.
// A run is kept unless its context was cancelled by the controller by the
// time its handler returned and the handler gave up: it answered nothing,
// or 5xx. A run that answered keeps its answer, whatever happened to its
// context: its work is done, and running it again would do it twice.
func (h *handler) serveRun(ctx context.Context, r *http.Request, body []byte, final **bufferedWriter) error {
	bw := newBufferedWriter()
	req := r.Clone(context.WithValue(ctx, retryingKey{}, true))
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	h.next.ServeHTTP(bw, req)
	if cause := context.Cause(ctx); errors.Is(cause, moirai.ErrCancelled) && gaveUp(bw.status) {
		return fmt.Errorf("%w: %w", errDiscarded, cause)
	}
	*final = bw
	if bw.status >= 500 {
		return fmt.Errorf("httpmw: status %d", bw.status)
	}
	return nil
}

// gaveUp reports whether a handler whose run was cancelled and that
// answered status (0: nothing) gave up its work.
func gaveUp(status int) bool { return status == 0 || status >= 500 }

// answerRetry answers a re-executable request whose runs ended with err,
// final the run that completed, if one did.
func (h *handler) answerRetry(w *answer, ctx context.Context, final *bufferedWriter, err error, class string) {
	switch {
	case final != nil:
		final.commit(w)
	case errors.Is(err, moirai.ErrCancelled):
		h.rejectCancelledErr(w, err, class) // dropped: no window to run it again
	case ctx.Err() != nil:
		// The client went away while the request waited: nobody to answer.
	default:
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// serveRetryOn is serveRetry for a request whose first run is outer, the
// task an outer Handler began (refined to this Handler's options): the
// first run serves r on it; a re-execution is a task of its own, begun
// from the context outer was begun from, whose values are r's (what the
// layers in between added) wherever it does not set its own.
func (h *handler) serveRetryOn(w *answer, r *http.Request, body []byte, outer *moirai.Task) {
	var final *bufferedWriter
	run := func(ctx context.Context) error {
		if ctx == outer.Context() {
			ctx = r.Context() // the first run: outer's, with the values added since
		} else {
			ctx = mergedCtx{Context: ctx, values: r.Context()}
		}
		return h.serveRun(ctx, r, body, &final)
	}
	opts := make([]any, len(h.cfg.retry))
	for i, o := range h.cfg.retry {
		opts[i] = o
	}
	err := mwx.RetryOn(h.ctl, outer, run, opts)
	h.answerRetry(w, taskx.Parent(outer), final, err, outer.Spec().Class)
}

// mergedCtx is a re-execution's context: its own task, cancellation and
// deadline, and the values of the request's context it does not hold.
type mergedCtx struct {
	context.Context
	values context.Context
}

func (c mergedCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// bufferedWriter holds a run's whole answer until it is known not to be
// cancelled. It deliberately has no Unwrap: nothing may reach the
// connection before the run is over.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBufferedWriter() *bufferedWriter { return &bufferedWriter{header: http.Header{}} }

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Flush is a no-op: the answer is sent when the run is over.
func (b *bufferedWriter) Flush() {}

// commit writes the kept run's answer through w, the request's answer,
// which applies the header rules to it as to any other.
func (b *bufferedWriter) commit(w *answer) {
	dst := w.Header()
	for k, v := range b.header {
		dst[k] = v
	}
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	w.Write(b.body.Bytes())
}

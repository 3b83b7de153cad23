package httpmw

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/tree"
)

// Headers of DAGOR's cooperation.
const (
	// HeaderPriority carries a request's compound priority "B/U" downstream.
	// A server honours it only from a trusted peer.
	HeaderPriority = "Moirai-Priority"
	// HeaderLevel carries the server's admission level "B/U" on every
	// response, admitted or rejected.
	HeaderLevel = "Moirai-Level"
	// HeaderContinuation, "1", marks a request of a task that an earlier
	// request already got through (admit.DAGOR.AdmitContinuation). A
	// server honours it only from a trusted peer.
	HeaderContinuation = "Moirai-Continuation"
)

// Lowest is the priority of a request nobody assigned a priority to.
var Lowest = mwx.Lowest

// ErrShed is returned by the client [Transport] for a request it sheds
// locally because the downstream's cached level would reject it.
var ErrShed = errors.New("httpmw: request shed locally: downstream admission level")

// untrusted counts priority headers ignored because they came from a peer
// that is not trusted.
var untrusted atomic.Int64

// Untrusted returns how many priority headers were ignored because their
// sender is not a trusted peer.
func Untrusted() int64 { return untrusted.Load() }

// WithAdmission makes the handler run d's admission check on every request
// and write d's level on every response; rejected requests get 503 with
// Retry-After before any task begins. The queueing time d learns from is
// the time between the request's arrival at the middleware and the start
// of the handler, or what WithArrival reports.
func WithAdmission(d *admit.DAGOR) Option {
	return func(c *config) { c.SetAdmission(d) }
}

// WithArrival sets how the time a request arrived is known, for example
// from a proxy's header ([RequestStart]); the queueing time is the
// difference to the start of the handler. Default: the moment the
// middleware sees the request.
//
// The arrival time must come from a trusted proxy that sets it on every
// request and overwrites what a client sent: a client that can set it
// chooses its own queueing time, and the admission level with it. As a
// bound on what one request can do, a queueing time longer than the
// admitter's window ([admit.DAGOR.Window]) counts as the window and a
// negative one (an arrival in the future) as zero; both are counted
// ([ClampedArrivals]). One request then moves a window's average
// queueing time by at most the window over the requests in it.
func WithArrival(fn func(*http.Request) (time.Time, bool)) Option {
	return func(c *config) { c.arrival = fn }
}

var clampedArrivals atomic.Int64

// ClampedArrivals returns how many arrival times (see [WithArrival])
// gave a negative queueing time or one longer than the admitter's
// window, and were clamped.
func ClampedArrivals() int64 { return clampedArrivals.Load() }

// queueDelay is the queueing time of a request that arrived at at,
// bounded by window.
func queueDelay(at time.Time, window time.Duration) time.Duration {
	q := time.Since(at)
	switch {
	case q < 0:
		clampedArrivals.Add(1)
		return 0
	case q > window:
		clampedArrivals.Add(1)
		return window
	}
	return q
}

// RequestStart returns an arrival function for [WithArrival] that reads
// header as proxies write it (see [ParseRequestStart]), for example
// RequestStart("X-Request-Start"). Use it only behind a proxy that sets
// the header on every request (see WithArrival).
func RequestStart(header string) func(*http.Request) (time.Time, bool) {
	header = http.CanonicalHeaderKey(header)
	return func(r *http.Request) (time.Time, bool) {
		v := r.Header[header]
		if len(v) != 1 {
			return time.Time{}, false
		}
		return ParseRequestStart(v[0])
	}
}

// ParseRequestStart parses a request's start time as proxies write it in
// X-Request-Start: an optional "t=", then either seconds since 1970 with
// a fraction ("1700000000.123", nginx's $msec) or an integer whose
// magnitude gives its unit: seconds, milliseconds, microseconds
// (HAProxy's and Heroku's) or nanoseconds. It reports false for
// anything else: signs, exponents, spaces, more than 19 digits in a part.
func ParseRequestStart(v string) (time.Time, bool) {
	v = strings.TrimPrefix(v, "t=")
	ip, fp, dot := strings.Cut(v, ".")
	if !digits(ip) || (dot && !digits(fp)) {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ip, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	if dot {
		if n > math.MaxInt64/int64(time.Second) {
			return time.Time{}, false
		}
		if len(fp) > 9 {
			fp = fp[:9]
		}
		ns, _ := strconv.ParseInt(fp+strings.Repeat("0", 9-len(fp)), 10, 64)
		return time.Unix(n, ns), true
	}
	switch {
	case n < 1e11:
		return time.Unix(n, 0), true
	case n < 1e14:
		return time.UnixMilli(n), true
	case n < 1e17:
		return time.UnixMicro(n), true
	}
	return time.Unix(0, n), true
}

// digits reports whether s is 1 to 19 ASCII digits.
func digits(s string) bool {
	if len(s) == 0 || len(s) > 19 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// WithPriority sets how an entry service assigns a request's priority
// (typically from an [admit.Actions] table and an [admit.UserHasher]).
// Default: the lowest priority.
//
// Derive the user from what the service has authenticated (a verified
// session, token or client certificate), never from a header the client
// sets: DAGOR refuses users by their hashed priority, so a refused client
// that can name its user (an X-User header) renames itself until a name
// hashes under the level. A header is safe only when a trusted proxy
// sets it on every request from its own authentication and overwrites
// what the client sent.
func WithPriority(fn func(*http.Request) moirai.Priority) Option {
	return func(c *config) { opt.Set(&c.priority, fn, fn != nil) }
}

// WithTrustedPeer sets which requests come from trusted peers, whose
// Moirai-Priority header is honoured. From everyone else the header is
// ignored (and counted, see [Untrusted]) and WithPriority assigns the
// priority. Default: nobody is trusted, so a client cannot raise its own
// priority.
func WithTrustedPeer(fn func(*http.Request) bool) Option {
	return func(c *config) { c.trusted = fn }
}

// priorityOf is the priority the request runs with.
func (h *handler) priorityOf(r *http.Request) moirai.Priority {
	if v, ok := r.Header[HeaderPriority]; ok {
		if h.cfg.trusted != nil && h.cfg.trusted(r) && len(v) == 1 {
			if p, ok := admit.ParsePriority(v[0]); ok {
				return p
			}
		} else {
			untrusted.Add(1)
		}
	}
	if h.cfg.priority != nil {
		return h.cfg.priority(r)
	}
	return Lowest
}

// continuation reports whether a trusted peer sent r as the continuation
// of a task.
func (h *handler) continuation(r *http.Request) bool {
	v := r.Header[HeaderContinuation]
	return len(v) == 1 && v[0] == "1" && h.cfg.trusted != nil && h.cfg.trusted(r)
}

// admitRequest runs admission; it reports false after writing the
// rejection. Every answer to the request carries the level (see
// answer.go).
func (h *handler) admitRequest(w *answer, r *http.Request, p moirai.Priority) bool {
	d := h.cfg.Dagor
	now := h.ctl.Now() // the controller's coarse clock: one atomic load
	w.level = admit.FormatLevel(d.Level())
	if !mwx.Admit(d, now, p, h.continuation(r)) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "overloaded: request rejected by admission control", http.StatusServiceUnavailable)
		return false
	}
	var q time.Duration
	if h.cfg.arrival != nil {
		if at, ok := h.cfg.arrival(r); ok {
			q = queueDelay(at, d.Window())
		}
	}
	d.Started(now, q)
	return true
}

// DefaultLevelTTL is how long a client trusts a downstream's level.
const DefaultLevelTTL = mwx.DefaultLevelTTL

// A TransportOption configures [Transport].
type TransportOption func(*transport)

// WithLevelTTL sets how long a downstream's cached level is used before it
// expires (default 1 s). A downstream that stops answering does not keep
// its last level beyond it.
func WithLevelTTL(d time.Duration) TransportOption {
	return func(t *transport) { t.SetLevelTTL(d) }
}

// WithoutLocalShedding keeps the priority header but never sheds locally
// (DAGOR without cooperation, "dagor-local" in the benchmark).
func WithoutLocalShedding() TransportOption {
	return func(t *transport) { t.SetNoShedding() }
}

// Transport returns a client RoundTripper that sends the priority of the
// task in the request's context downstream in Moirai-Priority, caches the
// level each downstream host returns, and sheds locally, with [ErrShed],
// requests that level would reject. base nil means
// http.DefaultTransport. The Moirai-… headers a request carries are the
// Transport's own: any other (a reverse proxy copies its caller's) is
// removed, so a request speaks only for the task in its context.
func Transport(base http.RoundTripper, opts ...TransportOption) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &transport{Client: mwx.DefaultClient(), base: base, pathName: func(r *http.Request) string { return r.URL.Host }}
	t.levels.Max = MaxLevelHosts
	mwx.Apply(t, opts)
	if t.ctl != nil && t.trustedDown == nil {
		// Said once per Transport, in the log of the controller that
		// cancels upward.
		mwx.NoTrustedPeer(t.ctl, "httpmw: Transport with WithTreeCancelPeer trusting no downstream: every culprit answer is ignored (counted in TreeStats), so the tree cancels nothing upward from this service")
	}
	return t
}

// WithPathName sets the name of the fence path a downstream request
// belongs to (default: its host), which a server's fence ([WithFence])
// learns its requests' paths from. The time a request counts is until
// its response's header arrives.
func WithPathName(fn func(*http.Request) string) TransportOption {
	return func(t *transport) { opt.Set(&t.pathName, fn, fn != nil) }
}

type transport struct {
	mwx.Client  // the level's TTL, local shedding: as in grpcmw
	base        http.RoundTripper
	levels      mwx.Levels // by host; at most MaxLevelHosts
	pathName    func(*http.Request) string
	ctl         *moirai.Controller
	trustedDown func(Peer) bool
}

// MaxLevelHosts is how many downstream hosts a [Transport] caches levels
// of. Hosts can come from requests (a proxy's targets), so the cache is
// bounded: a new host past the cap is sent to without local shedding,
// and counted ([UncachedLevels]).
const MaxLevelHosts = 1024

var uncachedLevels atomic.Int64

// UncachedLevels returns how many levels transports did not cache
// because they already held [MaxLevelHosts] hosts.
func UncachedLevels() int64 { return uncachedLevels.Load() }

// hasMoiraiHeader reports whether h holds a moirai header.
func hasMoiraiHeader(h http.Header) bool {
	for k := range h {
		if hasMoiraiPrefix(k) {
			return true
		}
	}
	return false
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	p, has := Lowest, false
	tk := moirai.From(r.Context())
	cont := tk.AdmittedDownstream()
	if tk != nil {
		p, has = tk.Spec().Priority, true
	}
	// A continuation is never shed locally: the server may still admit it
	// at the level before its last cut, which the cached level does not say.
	if !t.NoShed && !cont {
		if l, ok := t.levels.Get(r.URL.Host); ok && !l.Admits(p) {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, ErrShed
		}
	}
	// The moirai headers of a request are this transport's own: those a
	// handler passes on from its own caller (a reverse proxy copies them)
	// speak for a task that is not the request's.
	passed := hasMoiraiHeader(r.Header)
	if has || passed {
		r = r.Clone(r.Context())
		if passed {
			for k := range r.Header {
				if hasMoiraiPrefix(k) {
					delete(r.Header, k)
				}
			}
		}
	}
	if has {
		// One backing array for the headers this transport adds: the
		// tree's identity costs no allocation of its own.
		vals := make([]string, 3)
		vals[0] = admit.FormatPriority(p)
		r.Header[HeaderPriority] = vals[0:1:1]
		if cont {
			vals[1] = "1"
			r.Header[HeaderContinuation] = vals[1:2:2]
		}
		if tr := tk.Spec().Tree; tr != "" {
			vals[2] = tr
			r.Header[tree.Header] = vals[2:3:3]
		}
	}
	start := mwx.CallStart(r.Context())
	resp, err := t.base.RoundTrip(r)
	mwx.CallEnd(r.Context(), start, func() string { return t.pathName(r) })
	if err != nil {
		return resp, err
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		tk.MarkAdmittedDownstream()
	} else if v, ok := resp.Header[tree.CulpritHeader]; ok && t.ctl != nil {
		t.upward(tk, r, v)
	}
	if v := resp.Header.Get(HeaderLevel); v != "" {
		if l, ok := admit.ParseLevel(v); ok {
			if !t.levels.Put(r.URL.Host, l, t.TTL) {
				uncachedLevels.Add(1)
			}
		}
	}
	return resp, nil
}

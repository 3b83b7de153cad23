package mwx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/task"
)

// Server is the part of a server middleware's configuration that means
// the same whatever the protocol (httpmw.Handler, grpcmw's server
// interceptors): each package's config embeds it, sets its defaults with
// [DefaultServer], and its exported options of these settings are
// one-line forwarders to the setters below, typed in their own package so
// that an option of one package cannot configure the other's. A setter
// is where its setting's default, its invalid values and what it means
// are written once; the options' docs say it in their protocol's words
// (a request, a call). Settings whose argument is of the protocol (a
// function of an *http.Request or of a gRPC call's context and method:
// the class, the key, the priority, the trusted peer, the path) stay in
// each package's config.
type Server struct {
	// Cancellable says whether the controller may cancel the tasks
	// (default true); CancellableSet, whether an option said so, which a
	// nested layer then applies to the task an outer one began.
	Cancellable, CancellableSet bool
	// Routes are the objectives and background classes.
	Routes Routes
	// ExposeCause puts the cancellation's reason in a cancelled
	// request's answer.
	ExposeCause bool
	// SafeTwice are the classes that may run twice, whatever their
	// method.
	SafeTwice ClassSet
	// Dagor runs admission on every request, nil for none.
	Dagor *admit.DAGOR
	// Fence runs every request on a permit of its path, nil for none.
	Fence *fence.Classifier
	// Tree makes every request part of a request tree; Hop names this
	// service in its culprit answers.
	Tree bool
	Hop  string
}

// DefaultServer is the settings a middleware has before its options run:
// cancellable tasks, and nothing else on.
func DefaultServer() Server { return Server{Cancellable: true} }

// SetCancellable sets whether the controller may cancel the tasks.
func (s *Server) SetCancellable(on bool) { s.Cancellable, s.CancellableSet = on, true }

// SetObjective sets d as the objective of classes, or of every class when
// none is given; a class's own objective wins over every class's, a later
// call for a class over an earlier one. A negative d other than
// task.NoObjective is ignored.
func (s *Server) SetObjective(d time.Duration, classes []string) { s.Routes.SetObjective(d, classes) }

// SetBackground marks classes, or every class when none is given, as
// background work.
func (s *Server) SetBackground(classes []string) { s.Routes.SetBackground(classes) }

// SetExposedCause puts the cancellation's reason in a cancelled request's
// answer.
func (s *Server) SetExposedCause() { s.ExposeCause = true }

// SetReexecutable marks classes, or every class when none is given, as
// safe to run twice whatever their method.
func (s *Server) SetReexecutable(classes []string) { s.SafeTwice.Add(classes) }

// SetAdmission runs d's admission on every request (nil: none).
func (s *Server) SetAdmission(d *admit.DAGOR) { s.Dagor = d }

// SetFence runs every request on a permit of c's fence (nil: none).
func (s *Server) SetFence(c *fence.Classifier) { s.Fence = c }

// SetTree makes every request part of a request tree, hop naming this
// service in its culprit answers.
func (s *Server) SetTree(hop string) { s.Tree, s.Hop = true, hop }

// Apply sets in sp the objective and kind the settings give class.
func (s *Server) Apply(sp *task.Spec, class string) { s.Routes.Apply(sp, class) }

// DefaultLevelTTL is how long a client trusts a downstream's admission
// level by default.
const DefaultLevelTTL = time.Second

// Client is the part of a client middleware's configuration (httpmw's
// Transport, grpcmw's client interceptors) that means the same whatever
// the protocol, as [Server] is for the servers.
type Client struct {
	// TTL is how long a downstream's cached level is used (default
	// DefaultLevelTTL).
	TTL time.Duration
	// NoShed keeps sending priorities but never sheds locally.
	NoShed bool
}

// DefaultClient is the settings a client middleware has before its
// options run.
func DefaultClient() Client { return Client{TTL: DefaultLevelTTL} }

// SetLevelTTL sets how long a downstream's cached level is used; a d that
// is not positive is ignored.
func (c *Client) SetLevelTTL(d time.Duration) {
	if d > 0 {
		c.TTL = d
	}
}

// SetNoShedding keeps sending priorities but never sheds locally.
func (c *Client) SetNoShedding() { c.NoShed = true }

// Levels caches the admission level each downstream last answered with,
// for a client's local shedding; at most Max downstreams (0: no bound)
// when the downstreams come from requests. The zero value, with Max set,
// is ready to use.
type Levels struct {
	Max int
	m   sync.Map // downstream → cachedLevel
	n   atomic.Int64
}

type cachedLevel struct {
	level   admit.Level
	expires time.Duration // on Monotonic's clock
}

// Get returns the level cached for to, if one is and has not expired.
func (l *Levels) Get(to string) (admit.Level, bool) {
	if v, ok := l.m.Load(to); ok {
		if c := v.(cachedLevel); Monotonic() < c.expires {
			return c.level, true
		}
	}
	return admit.Level{}, false
}

// Put caches level for to, for ttl. It reports false, caching nothing,
// when to is new and Max downstreams are cached already.
func (l *Levels) Put(to string, level admit.Level, ttl time.Duration) bool {
	c := cachedLevel{level: level, expires: Monotonic() + ttl}
	if _, ok := l.m.Load(to); !ok && l.Max > 0 {
		if l.n.Add(1) > int64(l.Max) {
			l.n.Add(-1)
			return false
		}
		if _, loaded := l.m.LoadOrStore(to, c); !loaded {
			return true
		}
		l.n.Add(-1) // another call cached it first
	}
	l.m.Store(to, c)
	return true
}

// Lowest is the priority of a request or call nobody assigned a priority
// to: the last of admit's levels.
var Lowest = task.Priority{Business: admit.BusinessLevels - 1, User: admit.UserLevels - 1}

// Admit is d's admission of a request of priority p at now: as the
// continuation of a task that an earlier request got through (cont, said
// by a trusted peer) or as a new one.
func Admit(d *admit.DAGOR, now time.Duration, p task.Priority, cont bool) bool {
	if cont {
		return d.AdmitContinuation(now, p)
	}
	return d.AdmitPriority(now, p)
}

// CallStart is the start of a downstream call made with ctx, for
// [CallEnd]: 0 unless a fence learns from ctx's calls (fence.Tracked).
func CallStart(ctx context.Context) time.Duration {
	if !fence.Tracked(ctx) {
		return 0
	}
	return max(Monotonic(), 1)
}

// CallEnd reports to the fence that learns from ctx's calls a downstream
// call that began at start (CallStart's, 0 for none) and has just
// ended, to the path path names.
func CallEnd(ctx context.Context, start time.Duration, path func() string) {
	if start != 0 {
		fence.ObserveCall(ctx, path(), Monotonic()-start)
	}
}

// StreamStart reports to the fence that learns from ctx's calls a stream
// to the path path names, as a call of no length: a stream's length says
// little about the downstream's speed, so it makes the caller's path the
// stream's downstream only if the caller calls nothing else.
func StreamStart(ctx context.Context, path func() string) {
	if fence.Tracked(ctx) {
		fence.ObserveCall(ctx, path(), 0)
	}
}

// The names of DAGOR's cooperation between services, as grpcmw's metadata
// keys spell them; httpmw's headers are their canonical forms
// (http.CanonicalHeaderKey).
const (
	PriorityName     = "moirai-priority"     // a request's priority "B/U", downstream
	LevelName        = "moirai-level"        // the server's admission level "B/U", upstream
	ContinuationName = "moirai-continuation" // "1": a task already got a request through
)

// Apply runs opts on c in order, skipping nil ones: how every constructor
// of the middleware applies its options after setting its defaults.
func Apply[O ~func(*C), C any](c *C, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}

package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/tree"
)

// Metadata keys of DAGOR's cooperation.
const (
	// KeyPriority carries a call's priority "B/U" downstream; honoured only
	// from trusted peers.
	KeyPriority = "moirai-priority"
	// KeyLevel carries the server's admission level "B/U" in the response
	// header of every call, admitted or rejected.
	KeyLevel = "moirai-level"
	// KeyContinuation, "1", marks a call of a task that an earlier call
	// already got through (admit.DAGOR.AdmitContinuation); honoured only
	// from trusted peers.
	KeyContinuation = "moirai-continuation"
)

// Lowest is the priority of a call nobody assigned a priority to.
var Lowest = moirai.Priority{Business: admit.BusinessLevels - 1, User: admit.UserLevels - 1}

// ErrShed is the cause of the ResourceExhausted error a client interceptor
// returns for a call it sheds locally.
var ErrShed = errors.New("grpcmw: call shed locally: downstream admission level")

// An Option configures the server interceptors.
type Option func(*config)

type config struct {
	dagor       *admit.DAGOR
	admitter    admit.Admitter
	queue       *moirai.Queue
	priority    func(ctx context.Context, method string) moirai.Priority
	trusted     func(ctx context.Context) bool
	class       func(method string) string
	cancellable bool
	fence       *fence.Classifier
	pathOf      func(ctx context.Context, method string) string
	tree        bool
	hop         string

	// Per-method settings, which an inner interceptor also applies to the
	// task an outer one began (see the package documentation, "Nesting").
	classSet       bool
	cancellableSet bool
	routes         mwx.Routes // objectives and background classes
	exposeCause    bool
	unsafeAll      bool            // every class may run twice (reexec.go)
	unsafeClasses  map[string]bool // classes that may run twice
}

// apply sets in sp the objective and kind these options give class.
func (c *config) apply(sp *moirai.Spec, class string) { c.routes.Apply(sp, class) }

// WithObjective sets the latency objective of the calls of the given
// classes (see [WithClass]), or of every call when no class is given: the
// controller's detector counts such a call late past d rather than past
// the process-wide objective (moirai.WithSLO, which stays the default).
// d = moirai.NoObjective gives them none: their latency never counts as a
// miss, so their misses never make the controller act, though they may
// still be cancelled. A class's own objective wins over the interceptor's;
// a later option for the same class wins over an earlier one. Negative
// durations other than NoObjective are ignored.
func WithObjective(d time.Duration, classes ...string) Option {
	return func(c *config) { c.routes.SetObjective(d, classes) }
}

// WithBackground marks the calls of the given classes, or every call when
// no class is given, as background work (moirai.Background): they are
// never counted as late (their misses never trigger detection), and a
// cancellable background call is cancelled before any foreground one that
// would free the contended resource.
func WithBackground(classes ...string) Option {
	return func(c *config) { c.routes.SetBackground(classes) }
}

// WithExposedCause makes the UNAVAILABLE status of a call the controller
// cancelled carry the cancellation's reason (context.Cause of the call's
// context) after "server overloaded". Without it the message says only
// that the server is overloaded: the reason names the service's classes,
// resources and numbers. The handler reads the reason from context.Cause
// either way.
func WithExposedCause() Option { return func(c *config) { c.exposeCause = true } }

// WithAdmission runs d's admission on every call and sends d's level in the
// response header of every call; rejected calls fail with
// codes.ResourceExhausted before any task begins.
func WithAdmission(d *admit.DAGOR) Option { return func(c *config) { c.dagor = d } }

// WithAdmitter runs a priority-blind admitter (the lab's baselines CoDel,
// Breakwater and random shedding, in package bench/baseline) on every
// call: Admit at arrival, Started when the handler gets a worker (a false
// Started, CoDel's drop at dequeue, rejects the call then), Done when it
// returns. Rejected calls fail with
// codes.ResourceExhausted. It may be combined with WithAdmission; DAGOR's
// check runs first.
func WithAdmitter(a admit.Admitter) Option { return func(c *config) { c.admitter = a } }

// WithQueue runs every handler in a slot of q, a bounded worker pool with
// a waiting line in front of it, as the services DAGOR was built for do.
// The time a call waits for a slot is its queueing time, which admission
// (WithAdmission, WithAdmitter) detects overload from, and a wait moirai's
// other mechanisms see on q's resource. Without a queue, gRPC runs every
// call at once and the queueing time is 0: admission then only ever sheds
// what a client's cached level tells it to. A call whose line is full
// (q's backlog) fails with codes.ResourceExhausted.
func WithQueue(q *moirai.Queue) Option { return func(c *config) { c.queue = q } }

// WithFence runs every handler on a permit of c's fence, on the
// reservation of the call's path: the path c has learnt for the method
// from the downstream calls its handlers make (through the client
// interceptors of this package, which report each call made with the
// handler's context), or the local reservation for a method seen calling
// nothing. A call whose path's line is full fails with
// codes.ResourceExhausted. The time a call waits for its permit counts as
// queueing time for admission. With WithQueue too, a call takes its
// fence permit first, then its queue slot.
func WithFence(c *fence.Classifier) Option { return func(cf *config) { cf.fence = c } }

// WithPathOf sets a call's path itself, by name, instead of the
// classifier's learning (WithFence); "" means the classifier decides. A
// name the fence does not know gets its fallback reservation.
func WithPathOf(fn func(ctx context.Context, method string) string) Option {
	return func(c *config) { c.pathOf = fn }
}

// WithPriority sets how an entry service assigns a call's priority, from
// the method (an [admit.Actions] table) and the context (the user, via an
// [admit.UserHasher]). Default: the lowest priority.
func WithPriority(fn func(ctx context.Context, method string) moirai.Priority) Option {
	return func(c *config) {
		if fn != nil {
			c.priority = fn
		}
	}
}

// WithTrustedPeer sets which callers are trusted peers (for example by
// peer.FromContext address or mTLS identity): only their moirai-priority
// metadata is honoured. Default: nobody.
func WithTrustedPeer(fn func(ctx context.Context) bool) Option {
	return func(c *config) { c.trusted = fn }
}

// WithClass sets a call's task class from its method (default: the full
// method name).
func WithClass(fn func(method string) string) Option {
	return func(c *config) {
		if fn != nil {
			c.class, c.classSet = fn, true
		}
	}
}

// WithCancellable sets whether the controller may cancel calls (default
// true).
func WithCancellable(on bool) Option {
	return func(c *config) { c.cancellable, c.cancellableSet = on, true }
}

// WithTree makes every call part of a request tree (see package
// github.com/moirai-go/moirai/tree): a call from a trusted peer
// ([WithTrustedPeer]) that names its tree in [tree.Key] joins it, any
// other call is the root of a new one, and the task's Spec.Tree says
// which. A call of a received tree that the controller cancels, or whose
// task is cancelled because its own downstream call was a culprit
// (through the client interceptors' [WithTreeCancel]), fails with
// codes.Unavailable and a status detail (an errdetails.ErrorInfo of domain
// "moirai", reason [ReasonCulprit]) that names the tree, the hop that
// decided (hop, for this service's decisions) and its reason, and the
// expected wait, so that the caller cancels its own task for the tree;
// its trailer's grpc-retry-pushback-ms tells gRPC's retry policy not to
// retry it. Other cancelled calls get that pushback set to their class's
// expected wait.
func WithTree(hop string) Option {
	return func(c *config) { c.tree, c.hop = true, hop }
}

// ReasonCulprit is the ErrorInfo reason of a culprit answer.
const ReasonCulprit = "MOIRAI_CULPRIT"

func newConfig(opts []Option) config {
	c := config{class: func(m string) string { return m }, cancellable: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// warnTrust says in ctl's log, once per interceptor, that trees are on
// with no trusted caller.
func (c *config) warnTrust(ctl *moirai.Controller) {
	if c.tree && c.trusted == nil {
		mwx.NoTrustedPeer(ctl, fmt.Sprintf("grpcmw: WithTree(%q) without WithTrustedPeer: no caller is trusted, so every call is the root of a tree of its own and no culprit answer goes back to a caller", c.hop))
	}
}

// continuation reports whether a trusted peer sent the call as the
// continuation of a task.
func (c *config) continuation(ctx context.Context) bool {
	// ValueFromIncomingContext copies only this key's values, and nothing
	// when the key is absent (the common case).
	v := metadata.ValueFromIncomingContext(ctx, KeyContinuation)
	return len(v) == 1 && v[0] == "1" && c.trusted != nil && c.trusted(ctx)
}

func (c *config) priorityOf(ctx context.Context, method string) moirai.Priority {
	return c.priorityIn(ctx, method, c.isTrusted)
}

func (c *config) isTrusted(ctx context.Context) bool { return c.trusted != nil && c.trusted(ctx) }

// priorityIn is the priority of a call of ctx, from its incoming
// metadata. It reads the one key (metadata.ValueFromIncomingContext
// copies nothing when it is absent, the common case), never a copy of
// the whole metadata.
func (c *config) priorityIn(ctx context.Context, method string, trusted func(context.Context) bool) moirai.Priority {
	if v := metadata.ValueFromIncomingContext(ctx, KeyPriority); len(v) > 0 {
		if trusted(ctx) && len(v) == 1 {
			if p, ok := admit.ParsePriority(v[0]); ok {
				return p
			}
		} else {
			untrusted.Add(1)
		}
	}
	if c.priority != nil {
		return c.priority(ctx, method)
	}
	return Lowest
}

var epoch = time.Now()

func monotonic() time.Duration { return time.Since(epoch) }

// treeIn returns the tree a call of ctx joins, from its incoming
// metadata, and whether a trusted caller sent it (else it is a new
// tree's root).
func (c *config) treeIn(ctx context.Context, class string, trusted func(context.Context) bool) (string, bool) {
	if v := metadata.ValueFromIncomingContext(ctx, tree.Key); len(v) > 0 {
		if len(v) == 1 && tree.Parse(v[0]) && trusted(ctx) {
			return v[0], true
		}
		untrustedTrees.Add(1)
	}
	return tree.New(class), false
}

// call is an admitted call in progress: its task, its worker slot and when
// its handler started.
type call struct {
	ctl     *moirai.Controller
	t       *moirai.Task
	nested  bool // t is an outer interceptor's: it ends it
	permit  resource.Permit
	fenced  fence.Permit
	started time.Duration
	treeIn  bool   // the call's tree came from its caller
	method  string // the call's full method
}

var errRejected = status.Error(codes.ResourceExhausted, "overloaded: call rejected by admission control")

// begin runs admission, begins the call's task and waits for a worker slot.
func (c *config) begin(ctl *moirai.Controller, ctx context.Context, method string, setHeader func(metadata.MD) error) (context.Context, call, error) {
	// The peer's trust is asked once per call, and only when the call
	// carries something that needs it.
	trust := -1
	trusted := func(ctx context.Context) bool {
		if trust < 0 {
			trust = 0
			if c.isTrusted(ctx) {
				trust = 1
			}
		}
		return trust == 1
	}
	p := c.priorityIn(ctx, method, trusted)
	// The controller's clock: one atomic load while nothing is wrong,
	// precise while a detector fires.
	arrived := ctl.Now()
	d, a := c.dagor, c.admitter
	if d != nil {
		_ = setHeader(metadata.Pairs(KeyLevel, admit.FormatLevel(d.Level())))
		var admitted bool
		if c.continuation(ctx) {
			admitted = d.AdmitContinuation(arrived, p)
		} else {
			admitted = d.AdmitPriority(arrived, p)
		}
		if !admitted {
			return nil, call{}, errRejected
		}
	}
	if a != nil && !a.Admit(arrived) {
		return nil, call{}, errRejected
	}
	var t *moirai.Task
	nested, treeIn := false, false
	if outer := moirai.From(ctx); outer != nil && taskx.Owner(outer) == ctl.Tasks() && !taskx.Ended(outer) {
		// Nested in an interceptor of the same controller: one call,
		// one task, refined with this interceptor's options (the tree,
		// if any, is the outer one's).
		sp := outer.Spec()
		if c.classSet {
			sp.Class = c.class(method)
		}
		if c.cancellableSet {
			sp.Cancellable = c.cancellable
		}
		c.apply(&sp, sp.Class)
		taskx.Refine(outer, sp)
		t, nested = outer, true
	} else {
		sp := moirai.Spec{Class: c.class(method), Kind: moirai.Request, Priority: p, Cancellable: c.cancellable}
		c.apply(&sp, sp.Class)
		if c.tree {
			sp.Tree, treeIn = c.treeIn(ctx, sp.Class, trusted)
		}
		ctx, t = ctl.Begin(ctx, sp)
	}
	cl := call{ctl: ctl, t: t, nested: nested, treeIn: treeIn, method: method}
	if c.fence != nil {
		permit, err := c.fence.Fence().Acquire(ctx, c.path(ctx, method))
		if err != nil {
			if errors.Is(err, fence.ErrRejected) {
				err = status.Error(codes.ResourceExhausted, "overloaded: path's line full")
			} else {
				err = status.FromContextError(err).Err()
			}
			cl.endTask(err)
			return nil, call{}, err
		}
		cl.fenced = permit
		ctx = fence.WithCaller(ctx, c.fence, method)
	}
	if c.queue != nil {
		permit, err := c.queue.Enter(ctx)
		if err != nil {
			if errors.Is(err, resource.ErrRejected) {
				err = status.Error(codes.ResourceExhausted, "overloaded: worker queue full")
			} else {
				err = status.FromContextError(err).Err()
			}
			cl.release()
			cl.endTask(err)
			return nil, call{}, err
		}
		cl.permit = permit
	}
	cl.started = ctl.Now()
	wait := cl.started - arrived
	if d != nil {
		d.Started(cl.started, wait)
	}
	if a != nil && !a.Started(cl.started, wait) {
		cl.release()
		cl.endTask(errRejected)
		return nil, call{}, errRejected
	}
	return ctx, cl, nil
}

// end releases the call's slot, tells the admitter, and ends its task.
func (c *config) end(cl call, err error) {
	cl.release()
	if c.admitter != nil {
		now := cl.ctl.Now()
		c.admitter.Done(now, now-cl.started)
	}
	cl.endTask(err)
}

// endTask ends the call's task, unless an outer interceptor began it.
func (cl *call) endTask(err error) {
	if !cl.nested {
		cl.t.End(err)
	}
}

// endOnPanic ends the call of a handler that panicked, so that a recovery
// interceptor further out leaks neither its slot nor its task, and lets
// the panic go on.
func (c *config) endOnPanic(cl call) {
	if r := recover(); r != nil {
		c.end(cl, errHandlerPanic)
		panic(r)
	}
}

var errHandlerPanic = errors.New("grpcmw: handler panicked")

func (cl *call) release() {
	if cl.permit.Units() > 0 {
		_ = cl.permit.Release()
		cl.permit = resource.Permit{}
	}
	if cl.fenced.Path() != nil {
		_ = cl.fenced.Release()
		cl.fenced = fence.Permit{}
	}
}

// path is the fence reservation of a call of method.
func (c *config) path(ctx context.Context, method string) *fence.Path {
	if c.pathOf != nil {
		if name := c.pathOf(ctx, method); name != "" {
			return c.fence.Fence().Path(name)
		}
	}
	return c.fence.PathOf(method)
}

// outcome maps a handler's result and the task's cancellation to the
// error the call returns: a cancelled call is UNAVAILABLE, with its
// class's expected wait in the trailer (see KeyRetryAfter) set by
// setTrailer, and a message that says only that the server is
// overloaded; the reason stays in the context's cause.
//
// With WithTree, a cancelled call of a tree its caller sent carries the
// culprit answer in a status detail instead (see WithTree).
func (c *config) outcome(ctl *moirai.Controller, cl call, ctx context.Context, err error, setTrailer func(metadata.MD) error) error {
	cause := context.Cause(ctx)
	if !errors.Is(cause, moirai.ErrCancelled) || err == nil {
		if c.tree && err != nil {
			// A downstream's culprit answer that the handler passes on
			// is not this hop's: its caller must not act on it.
			if _, ok := culpritIn(err); ok {
				mwx.IgnoredCulprit(ctl)
				return status.Error(status.Code(err), status.Convert(err).Message())
			}
		}
		return err
	}
	if status.Code(err) == codes.Unavailable && errors.Is(err, errAnswered) {
		return err // an inner interceptor answered already
	}
	// The class an inner interceptor may have refined the task to.
	class := moirai.From(ctx).Spec().Class
	msg := "server overloaded"
	if c.exposeCause {
		msg += ": " + cause.Error()
	}
	wait := min(ctl.ExpectedWait(class), maxRetryAfter)
	var cu *tree.Culprit
	isCulprit := false
	if c.tree {
		if cu, isCulprit = ctl.CulpritAnswer(ctx, c.hop); isCulprit {
			wait = max(wait, cu.Wait)
		}
	}
	ra := strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
	if !isCulprit || !cl.treeIn {
		// The client's retry policy retries after the expected wait a
		// call safe to run twice, and never another (reexec.go).
		pushback := "-1"
		if c.reexecutable(cl.method, class) {
			pushback = strconv.FormatInt(wait.Milliseconds(), 10)
		}
		_ = setTrailer(metadata.Pairs(KeyRetryAfter, ra, keyPushback, pushback))
		return overloaded{status.New(codes.Unavailable, msg)}
	}
	_ = setTrailer(metadata.Pairs(KeyRetryAfter, ra, keyPushback, "-1"))
	st, derr := status.New(codes.Unavailable, msg+" (request tree cancelled as a culprit)").WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonCulprit, Domain: "moirai", Metadata: map[string]string{"culprit": cu.Format()}})
	if derr != nil {
		return overloaded{status.New(codes.Unavailable, msg)}
	}
	return overloaded{st}
}

// keyPushback is gRPC's retry pushback trailer (gRFC A6): a negative value
// stops the client's retry policy from retrying the call, a positive one
// delays the retry that long, in milliseconds.
const keyPushback = "grpc-retry-pushback-ms"

// errAnswered marks the UNAVAILABLE error of a cancelled call that an
// interceptor already turned into its answer.
var errAnswered = errors.New("grpcmw: cancelled call answered")

// overloaded is the answer to a cancelled call.
type overloaded struct{ st *status.Status }

func (o overloaded) Error() string              { return o.st.Err().Error() }
func (o overloaded) GRPCStatus() *status.Status { return o.st }
func (o overloaded) Is(target error) bool       { return target == errAnswered }

// UnaryServerInterceptor makes every unary call a task of ctl: admission,
// priority, and a task context that is the call's context, so the call's
// cancellation reaches downstream calls and the controller's cancellation
// reaches the handler.
func UnaryServerInterceptor(ctl *moirai.Controller, opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(opts)
	c.warnTrust(ctl)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx2, cl, err := c.begin(ctl, ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		defer c.endOnPanic(cl)
		resp, err := handler(ctx2, req)
		err = c.outcome(ctl, cl, ctx2, err, func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
		c.end(cl, err)
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the whole
// stream is one task.
func StreamServerInterceptor(ctl *moirai.Controller, opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(opts)
	c.warnTrust(ctl)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, cl, err := c.begin(ctl, ss.Context(), info.FullMethod, ss.SetHeader)
		if err != nil {
			return err
		}
		defer c.endOnPanic(cl)
		err = handler(srv, &stream{ServerStream: ss, ctx: ctx})
		err = c.outcome(ctl, cl, ctx, err, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		c.end(cl, err)
		return err
	}
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// A ClientOption configures the client interceptors.
type ClientOption func(*client)

// WithLevelTTL sets how long a downstream's level is used (default 1 s).
func WithLevelTTL(d time.Duration) ClientOption {
	return func(c *client) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// WithoutLocalShedding sends priorities but never sheds locally.
func WithoutLocalShedding() ClientOption { return func(c *client) { c.noShed = true } }

// WithPathName sets the name of the fence path a downstream call belongs
// to (default: the connection's target), which the server interceptors'
// fence (WithFence) learns its callers' paths from.
func WithPathName(fn func(target, method string) string) ClientOption {
	return func(c *client) {
		if fn != nil {
			c.pathName = fn
		}
	}
}

// WithTreeCancel turns on upward cancellation (see package
// github.com/moirai-go/moirai/tree): when a call fails with a culprit
// answer (see [WithTree]) from a target trusted says is a trusted
// downstream, for the tree of the task in the call's context, ctl cancels
// that task (moirai.Controller.CancelTree), hence its other downstream
// calls, and its own server interceptor answers its caller in turn. A
// culprit answer from an untrusted target, or naming another tree, is
// ignored and counted ([ForgedCulprits]). The call's error is returned
// unchanged; tree.Of on the task's context's cause gives the culprit.
//
// Deprecated: use WithTreeCancelPeer, whose Peer has the target's host
// and port apart.
func WithTreeCancel(ctl *moirai.Controller, trusted func(target string) bool) ClientOption {
	if trusted == nil {
		return WithTreeCancelPeer(ctl, nil)
	}
	return WithTreeCancelPeer(ctl, func(p Peer) bool { return trusted(p.Target) })
}

// WithTreeCancelPeer is the upward cancellation of [WithTreeCancel] whose
// trust function gets the downstream as a [Peer]: its target, with the
// host and port apart, and the call's method. trusted nil trusts no
// downstream: every culprit answer is ignored, which ctl's log says at
// once.
func WithTreeCancelPeer(ctl *moirai.Controller, trusted func(Peer) bool) ClientOption {
	return func(c *client) { c.ctl, c.trustedDown = ctl, trusted }
}

// Peer is the downstream a client interceptor's call went to.
type Peer struct {
	// Target is the connection's target as it was dialed
	// (grpc.ClientConn.Target: "dns:///b1.internal:50051").
	Target string
	// Host and Port are the target's endpoint, apart ("b1.internal",
	// "50051"; an IPv6 address without brackets); Port is "" when the
	// target names none. A unix socket's Host is its path.
	Host, Port string
	// Method is the call's full method ("/pkg.Service/Method").
	Method string
}

// peerOf parses target (scheme://authority/endpoint, or a bare endpoint)
// into a Peer.
func peerOf(target, method string) Peer {
	if p, ok := strings.CutPrefix(target, "unix:"); ok { // a socket: its path is the host
		return Peer{Target: target, Host: strings.TrimPrefix(p, "//"), Method: method}
	}
	ep := target
	if i := strings.Index(ep, "://"); i >= 0 {
		ep = ep[i+3:]
		if j := strings.IndexByte(ep, '/'); j >= 0 {
			ep = ep[j+1:]
		}
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(ep, "["), "]"), ""
	}
	return Peer{Target: target, Host: host, Port: port, Method: method}
}

var forgedCulprits, untrustedTrees atomic.Int64

// ForgedCulprits returns how many culprit answers the client interceptors
// ignored: from a downstream not trusted, or naming a tree other than the
// caller's task's.
func ForgedCulprits() int64 { return forgedCulprits.Load() }

// UntrustedTrees returns how many tree identities the server
// interceptors ignored: from a peer not trusted, or malformed.
func UntrustedTrees() int64 { return untrustedTrees.Load() }

type client struct {
	ttl         time.Duration
	noShed      bool
	levels      sync.Map // target → cachedLevel
	pathName    func(target, method string) string
	ctl         *moirai.Controller
	trustedDown func(Peer) bool
}

// upward cancels the caller's task of a call that failed with err when err
// is a culprit answer for its tree from a trusted target.
func (c *client) upward(ctx context.Context, target, method string, err error) {
	if status.Code(err) != codes.Unavailable || c.ctl == nil {
		return
	}
	cu, ok := culpritIn(err)
	if !ok {
		return
	}
	t := moirai.From(ctx)
	if c.trustedDown == nil || t == nil || t.Spec().Tree != cu.Tree || !c.trustedDown(peerOf(target, method)) {
		forgedCulprits.Add(1)
		mwx.IgnoredCulprit(c.ctl)
		return
	}
	_ = c.ctl.CancelTree(t, cu)
}

// culpritIn returns the culprit answer in a call's status, if any. A
// malformed one counts as forged.
func culpritIn(err error) (*tree.Culprit, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		ei, ok := d.(*errdetails.ErrorInfo)
		if !ok || ei.GetDomain() != "moirai" || ei.GetReason() != ReasonCulprit {
			continue
		}
		cu, ok := tree.ParseCulprit(ei.GetMetadata()["culprit"])
		if !ok {
			forgedCulprits.Add(1)
		}
		return cu, ok
	}
	return nil, false
}

type cachedLevel struct {
	level   admit.Level
	expires time.Duration
}

func newClient(opts []ClientOption) *client {
	c := &client{ttl: time.Second, pathName: func(target, _ string) string { return target }}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.ctl != nil && c.trustedDown == nil {
		mwx.NoTrustedPeer(c.ctl, "grpcmw: client interceptor with WithTreeCancel trusting no target: every culprit answer is ignored (counted in TreeStats), so the tree cancels nothing upward from this service")
	}
	return c
}

// prepare sheds locally or returns the outgoing context. A continuation
// (a call of a task that an earlier call got through) is never shed
// locally: the server may still admit it at the level before its last
// cut, which the cached level does not say.
func (c *client) prepare(ctx context.Context, target string) (context.Context, error) {
	p, has, cont := Lowest, false, false
	var tr string
	t := moirai.From(ctx)
	if t != nil {
		sp := t.Spec()
		p, has, cont, tr = sp.Priority, true, t.AdmittedDownstream(), sp.Tree
	}
	if cont {
		ctx = metadata.AppendToOutgoingContext(ctx, KeyContinuation, "1")
	} else if !c.noShed {
		if v, ok := c.levels.Load(target); ok {
			l := v.(cachedLevel)
			if monotonic() < l.expires && !l.level.Admits(p) {
				return nil, status.Error(codes.ResourceExhausted, ErrShed.Error())
			}
		}
	}
	if has {
		if tr != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, KeyPriority, admit.FormatPriority(p), tree.Key, tr)
		} else {
			ctx = metadata.AppendToOutgoingContext(ctx, KeyPriority, admit.FormatPriority(p))
		}
	}
	return ctx, nil
}

func (c *client) learn(target string, md metadata.MD) {
	if v := md.Get(KeyLevel); len(v) == 1 {
		if l, ok := admit.ParseLevel(v[0]); ok {
			c.levels.Store(target, cachedLevel{level: l, expires: monotonic() + c.ttl})
		}
	}
}

// UnaryClientInterceptor sends the priority of the task in the call's
// context, learns each target's level from response headers, and sheds
// calls that level would reject with codes.ResourceExhausted.
func UnaryClientInterceptor(opts ...ClientOption) grpc.UnaryClientInterceptor {
	c := newClient(opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		target := cc.Target()
		ctx, err := c.prepare(ctx, target)
		if err != nil {
			return err
		}
		var md metadata.MD
		var start time.Time
		tracked := fence.Tracked(ctx)
		if tracked {
			start = time.Now()
		}
		err = invoker(ctx, method, req, reply, cc, append(callOpts, grpc.Header(&md))...)
		if tracked {
			fence.ObserveCall(ctx, c.pathName(target, method), time.Since(start))
		}
		c.learn(target, md)
		if admitted(err) {
			moirai.From(ctx).MarkAdmittedDownstream()
		} else if err != nil {
			c.upward(ctx, target, method, err)
		}
		return err
	}
}

// admitted reports whether a call that ended with err was admitted by the
// server: not refused by admission (ResourceExhausted) and not lost before
// it reached a handler (Unavailable).
func admitted(err error) bool {
	c := status.Code(err)
	return c != codes.ResourceExhausted && c != codes.Unavailable
}

// StreamClientInterceptor is UnaryClientInterceptor for streams; the level
// is learnt when the stream's header arrives.
func StreamClientInterceptor(opts ...ClientOption) grpc.StreamClientInterceptor {
	c := newClient(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		target := cc.Target()
		ctx, err := c.prepare(ctx, target)
		if err != nil {
			return nil, err
		}
		if fence.Tracked(ctx) {
			// A stream's length says little about the downstream's
			// speed: it counts as a call of no length, which makes the
			// caller's path the stream's downstream only if it calls
			// nothing else.
			fence.ObserveCall(ctx, c.pathName(target, method), 0)
		}
		cs, err := streamer(ctx, desc, cc, method, callOpts...)
		if err != nil {
			return nil, err
		}
		// Waiting for the header here would deadlock every stream whose
		// server speaks only after the client's first message: the level
		// is learnt when the header has arrived anyway, at the caller's
		// Header or first RecvMsg.
		return &clientStream{ClientStream: cs, c: c, target: target, method: method, t: moirai.From(ctx), ctx: ctx}, nil
	}
}

// clientStream learns the downstream's level from the first header or
// trailer the stream sees.
type clientStream struct {
	grpc.ClientStream
	c       *client
	target  string
	method  string
	t       *moirai.Task // the caller's task, nil if none
	ctx     context.Context
	learned atomic.Bool
}

func (s *clientStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err == nil && !s.learned.Load() && len(md.Get(KeyLevel)) > 0 {
		s.learned.Store(true)
		s.c.learn(s.target, md)
	}
	return md, err
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.t.MarkAdmittedDownstream() // a message came back: admitted
	} else if err != io.EOF {
		s.c.upward(s.ctx, s.target, s.method, err)
	}
	if s.learned.Load() {
		return err
	}
	// Once RecvMsg has returned, the header (or a trailers-only answer)
	// has arrived, so neither call blocks.
	s.learned.Store(true)
	if md, herr := s.ClientStream.Header(); herr == nil && len(md.Get(KeyLevel)) > 0 {
		s.c.learn(s.target, md)
	} else if err != nil {
		s.c.learn(s.target, s.ClientStream.Trailer())
	}
	return err
}

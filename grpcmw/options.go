package grpcmw

import (
	"context"
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/mwx"
)

// An Option configures the server interceptors.
type Option func(*config)

type config struct {
	// The settings that mean the same in httpmw: cancellability,
	// objectives and background classes, the exposed cause, the classes
	// safe to run twice, admission, the fence, the tree. An inner
	// interceptor also applies the per-method ones to the task an outer
	// one began (see the package documentation, "Nesting").
	mwx.Server

	admitter admit.Admitter
	queue    *moirai.Queue
	priority func(ctx context.Context, method string) moirai.Priority
	trusted  func(ctx context.Context) bool
	class    func(method string) string // set with classSet
	classSet bool
	pathOf   func(ctx context.Context, method string) string
}

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
	return func(c *config) { c.SetObjective(d, classes) }
}

// WithBackground marks the calls of the given classes, or every call when
// no class is given, as background work (moirai.Background): they are
// never counted as late (their misses never trigger detection), and a
// cancellable background call is cancelled before any foreground one that
// would free the contended resource.
func WithBackground(classes ...string) Option {
	return func(c *config) { c.SetBackground(classes) }
}

// WithExposedCause makes the UNAVAILABLE status of a call the controller
// cancelled carry the cancellation's reason (context.Cause of the call's
// context) after "server overloaded". Without it the message says only
// that the server is overloaded: the reason names the service's classes,
// resources and numbers. The handler reads the reason from context.Cause
// either way.
func WithExposedCause() Option { return func(c *config) { c.SetExposedCause() } }

// WithAdmission runs d's admission on every call and sends d's level in the
// response header of every call; rejected calls fail with
// codes.ResourceExhausted before any task begins.
func WithAdmission(d *admit.DAGOR) Option { return func(c *config) { c.SetAdmission(d) } }

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
func WithFence(c *fence.Classifier) Option { return func(cf *config) { cf.SetFence(c) } }

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
	return func(c *config) { c.SetCancellable(on) }
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
	return func(c *config) { c.SetTree(hop) }
}

// ReasonCulprit is the ErrorInfo reason of a culprit answer.
const ReasonCulprit = "MOIRAI_CULPRIT"

func newConfig(opts []Option) config {
	c := config{Server: mwx.DefaultServer()} // class: the full method, unless WithClass
	mwx.Apply(&c, opts)
	return c
}

// warnTrust says in ctl's log, once per interceptor, that trees are on
// with no trusted caller.
func (c *config) warnTrust(ctl *moirai.Controller) {
	if c.Tree && c.trusted == nil {
		mwx.NoTrustedPeer(ctl, fmt.Sprintf("grpcmw: WithTree(%q) without WithTrustedPeer: no caller is trusted, so every call is the root of a tree of its own and no culprit answer goes back to a caller", c.Hop))
	}
}

// WithLevelTTL sets how long a downstream's level is used (default 1 s).
func WithLevelTTL(d time.Duration) ClientOption {
	return func(c *client) { c.SetLevelTTL(d) }
}

// WithoutLocalShedding sends priorities but never sheds locally.
func WithoutLocalShedding() ClientOption { return func(c *client) { c.SetNoShedding() } }

package grpcmw

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/tree"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// continuation reports whether a trusted peer sent the call as the
// continuation of a task.
func (c *config) continuation(ctx context.Context) bool {
	v := incoming(ctx, KeyContinuation)
	return len(v) == 1 && v[0] == "1" && c.trusted != nil && c.trusted(ctx)
}

func (c *config) priorityOf(ctx context.Context, method string) moirai.Priority {
	return c.priorityIn(ctx, method, c.isTrusted)
}

func (c *config) isTrusted(ctx context.Context) bool { return c.trusted != nil && c.trusted(ctx) }

// priorityIn is the priority of a call of ctx, from its incoming
// metadata. It reads the one key (see incoming), never a copy of the
// whole metadata.
func (c *config) priorityIn(ctx context.Context, method string, trusted func(context.Context) bool) moirai.Priority {
	if v := incoming(ctx, KeyPriority); len(v) > 0 {
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

// treeIn returns the tree a call of ctx joins, from its incoming
// metadata, and whether a trusted caller sent it (else it is a new
// tree's root).
func (c *config) treeIn(ctx context.Context, class string, trusted func(context.Context) bool) (string, bool) {
	if v := incoming(ctx, tree.Key); len(v) > 0 {
		if len(v) == 1 && tree.Parse(v[0]) && trusted(ctx) {
			return v[0], true
		}
		untrustedTrees.Add(1)
	}
	return tree.New(class), false
}

// call is an admitted call in progress: its task, its worker slot and,
// under admission, when its handler started.
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

// begin runs admission, begins the call's task and waits for a worker
// slot, filling cl (the caller's, so that the call is not copied on the
// way in and out).
func (c *config) begin(ctl *moirai.Controller, ctx context.Context, method string, setHeader func(metadata.MD) error, cl *call) (context.Context, error) {
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
	if c.Dagor == nil && c.admitter == nil {
		// No admission: no queueing time to measure.
		ctx = c.task(ctl, ctx, method, p, trusted, cl)
		return c.enter(ctx, cl)
	}
	// The controller's clock: one atomic load while nothing is wrong,
	// precise while a detector fires.
	arrived := ctl.Now()
	if !c.admit(ctx, p, arrived, setHeader) {
		return nil, errRejected
	}
	ctx = c.task(ctl, ctx, method, p, trusted, cl)
	ctx, err := c.enter(ctx, cl)
	if err != nil {
		return nil, err
	}
	cl.started = ctl.Now()
	wait := cl.started - arrived
	if c.Dagor != nil {
		c.Dagor.Started(cl.started, wait)
	}
	if c.admitter != nil && !c.admitter.Started(cl.started, wait) {
		cl.release()
		cl.endTask(errRejected)
		return nil, errRejected
	}
	return ctx, nil
}

// admit asks admission control whether a call of priority p that arrived
// at arrived may run, sending the server's level in the header first.
func (c *config) admit(ctx context.Context, p moirai.Priority, arrived time.Duration, setHeader func(metadata.MD) error) bool {
	if d := c.Dagor; d != nil {
		_ = setHeader(metadata.Pairs(KeyLevel, admit.FormatLevel(d.Level())))
		if !mwx.Admit(d, arrived, p, c.continuation(ctx)) {
			return false
		}
	}
	return c.admitter == nil || c.admitter.Admit(arrived)
}

// task begins the call's task, or refines the task of an interceptor of
// the same controller it is nested in, and sets cl to the call.
func (c *config) task(ctl *moirai.Controller, ctx context.Context, method string, p moirai.Priority, trusted func(context.Context) bool, cl *call) context.Context {
	if outer := moirai.From(ctx); outer != nil && taskx.Owner(outer) == ctl.Tasks() && !taskx.Ended(outer) {
		// Nested in an interceptor of the same controller: one call,
		// one task, refined with this interceptor's options (the tree,
		// if any, is the outer one's).
		sp := outer.Spec()
		if c.classSet {
			sp.Class = c.class(method)
		}
		if c.CancellableSet {
			sp.Cancellable = c.Cancellable
		}
		c.Apply(&sp, sp.Class)
		taskx.Refine(outer, sp)
		*cl = call{ctl: ctl, t: outer, nested: true, method: method}
		return ctx
	}
	sp := moirai.Spec{Class: method, Kind: moirai.Request, Priority: p, Cancellable: c.Cancellable}
	if c.classSet {
		sp.Class = c.class(method)
	}
	c.Apply(&sp, sp.Class)
	treeIn := false
	if c.Tree {
		sp.Tree, treeIn = c.treeIn(ctx, sp.Class, trusted)
	}
	ctx, t := ctl.Begin(ctx, sp)
	*cl = call{ctl: ctl, t: t, treeIn: treeIn, method: method}
	return ctx
}

// enter takes the call's fence permit and worker slot, when configured;
// on failure it ends the call's task and returns the status to answer.
func (c *config) enter(ctx context.Context, cl *call) (context.Context, error) {
	if c.Fence != nil {
		permit, err := c.Fence.Fence().Acquire(ctx, c.path(ctx, cl.method))
		if err != nil {
			if errors.Is(err, fence.ErrRejected) {
				err = status.Error(codes.ResourceExhausted, "overloaded: path's line full")
			} else {
				err = status.FromContextError(err).Err()
			}
			cl.endTask(err)
			return nil, err
		}
		cl.fenced = permit
		ctx = fence.WithCaller(ctx, c.Fence, cl.method)
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
			return nil, err
		}
		cl.permit = permit
	}
	return ctx, nil
}

// end releases the call's slot, tells the admitter, and ends its task.
func (c *config) end(cl *call, err error) {
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
func (c *config) endOnPanic(cl *call) {
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
			return c.Fence.Fence().Path(name)
		}
	}
	return c.Fence.PathOf(method)
}

// outcome maps a handler's result and the task's cancellation to the
// error the call returns: a cancelled call is UNAVAILABLE, with its
// class's expected wait in the trailer (see KeyRetryAfter) set by
// setTrailer, and a message that says only that the server is
// overloaded; the reason stays in the context's cause.
//
// With WithTree, a cancelled call of a tree its caller sent carries the
// culprit answer in a status detail instead (see WithTree).
func (c *config) outcome(ctl *moirai.Controller, cl *call, ctx context.Context, err error, setTrailer func(metadata.MD) error) error {
	if err == nil {
		return nil // the call completed: its answer stands, cancelled or not
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, moirai.ErrCancelled) {
		if c.Tree {
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
	if c.ExposeCause {
		msg += ": " + cause.Error()
	}
	wait := min(ctl.ExpectedWait(class), maxRetryAfter)
	var cu *tree.Culprit
	isCulprit := false
	if c.Tree {
		if cu, isCulprit = ctl.CulpritAnswer(ctx, c.Hop); isCulprit {
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
		var cl call
		ctx2, err := c.begin(ctl, ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) }, &cl)
		if err != nil {
			return nil, err
		}
		defer c.endOnPanic(&cl)
		resp, err := handler(ctx2, req)
		err = c.outcome(ctl, &cl, ctx2, err, func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
		c.end(&cl, err)
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the whole
// stream is one task.
func StreamServerInterceptor(ctl *moirai.Controller, opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(opts)
	c.warnTrust(ctl)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var cl call
		ctx, err := c.begin(ctl, ss.Context(), info.FullMethod, ss.SetHeader, &cl)
		if err != nil {
			return err
		}
		defer c.endOnPanic(&cl)
		err = handler(srv, &stream{ServerStream: ss, ctx: ctx})
		err = c.outcome(ctl, &cl, ctx, err, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		c.end(&cl, err)
		return err
	}
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

package grpcmw

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/tree"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A ClientOption configures the client interceptors.
type ClientOption func(*client)

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

type client struct {
	mwx.Client             // the level's TTL, local shedding: as in httpmw
	levels      mwx.Levels // by target (the application's connections)
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

func newClient(opts []ClientOption) *client {
	c := &client{Client: mwx.DefaultClient(), pathName: func(target, _ string) string { return target }}
	mwx.Apply(c, opts)
	c.warnTrust()
	return c
}

// warnTrust says in the log of the controller that cancels upward, once
// per interceptor, that it trusts no downstream.
func (c *client) warnTrust() {
	if c.ctl != nil && c.trustedDown == nil {
		mwx.NoTrustedPeer(c.ctl, "grpcmw: client interceptor with WithTreeCancel trusting no target: every culprit answer is ignored (counted in TreeStats), so the tree cancels nothing upward from this service")
	}
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
	} else if !c.NoShed {
		if l, ok := c.levels.Get(target); ok && !l.Admits(p) {
			return nil, status.Error(codes.ResourceExhausted, ErrShed.Error())
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
			c.levels.Put(target, l, c.TTL)
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
		start := mwx.CallStart(ctx)
		err = invoker(ctx, method, req, reply, cc, append(callOpts, grpc.Header(&md))...)
		mwx.CallEnd(ctx, start, func() string { return c.pathName(target, method) })
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
		mwx.StreamStart(ctx, func() string { return c.pathName(target, method) })
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

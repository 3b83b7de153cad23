// Package grpcmw holds moirai's gRPC interceptors: unary and stream, server
// and client.
//
// The server interceptors make every call a moirai task whose context is
// the call's context (a client's cancellation reaches the handler and the
// calls it makes; the controller's cancellation does too). With
// [WithAdmission] they run DAGOR's admission first and send the server's
// admission level in the response header of every call, admitted or
// rejected; rejected calls fail with codes.ResourceExhausted.
//
// # Objectives, background work and answers
//
// [WithObjective] gives the calls of some classes (see [WithClass]), or
// all, a latency objective of their own instead of the controller's
// (moirai.WithSLO), or none (moirai.NoObjective); [WithBackground] marks
// classes as background work: never counted late, and cancelled before
// any foreground call that would free the contended resource. A call the
// controller cancels fails with codes.Unavailable, its class's expected
// wait in the trailer ([KeyRetryAfter]), and a message that says only that
// the server is overloaded, unless [WithExposedCause] adds the reason;
// the handler reads it from context.Cause.
//
// # Nesting
//
// Server interceptors of one controller chained twice (a server-wide one
// and one a service adds) make one task per call: the inner one finds the
// outer one's task in the call's context and refines it with its own
// options (the class with [WithClass], the cancellability with
// [WithCancellable], the objective and kind its [WithObjective] and
// [WithBackground] give the class) instead of beginning a second; the
// outer one ends it. Admission, fences and queues run in each layer that
// has them.
//
// # Trust boundary
//
// A call's priority comes from the moirai-priority metadata only when
// [WithTrustedPeer] says the caller is a trusted peer; otherwise the header
// is ignored and counted ([Untrusted]) and [WithPriority], the entry
// service's own assignment, decides. Malformed values are refused by
// admit.ParsePriority and counted there.
//
// # Cooperation
//
// The client interceptors send the priority of the task in the call's
// context downstream, cache the level each target returned for a TTL (1 s
// by default; a target that stops answering does not keep its level), and
// shed locally, with ResourceExhausted, calls that level would reject.
// Once a call of a task is admitted, the task's later calls go out as
// continuations ([KeyContinuation]), past local shedding; a server that
// trusts the peer admits them at its level from before a recent cut
// (admit.DAGOR.AdmitContinuation), so a task is not cut off half-way.
//
// # Request trees
//
// With [WithTree] on the servers and [WithTreeCancelPeer] on the clients,
// a call carries the identity of the request tree it serves (package
// github.com/moirai-go/moirai/tree), honoured from trusted peers only,
// and a call the controller cancels as a culprit answers with a status
// detail that makes the caller cancel its own task for the tree, hence
// its other downstream calls, up to the root; gRPC's retry policy is told
// not to retry it. Forged answers, and culprit answers a handler passes
// on from a downstream, are ignored and counted ([ForgedCulprits],
// moirai.Controller.TreeStats). A server with WithTree but no
// [WithTrustedPeer], or a client trusting no downstream, says so in the
// controller's log when it is built. See docs/TREE.md.
//
// # Retries of cancelled calls
//
// gRPC re-executes a call through its client's retry policy, which
// retries UNAVAILABLE after the pushback the server's trailer sets. A
// cancelled call's pushback is its class's expected wait only when the
// call is safe to run twice — its method declared idempotent in its
// .proto (idempotency_level IDEMPOTENT or NO_SIDE_EFFECTS) or its class
// marked [WithReexecutable] — and -1 (never retried) otherwise. A handler
// that returns a response after its context was cancelled keeps it.
//
// # Path fences
//
// With [WithFence], every handler runs on a permit of a [github.com/moirai-go/moirai/fence.Fence], on
// the reservation of the call's path, so that calls stuck on one slow
// downstream cannot take every worker. The path is learnt: the server
// interceptors record the method in the handler's context, the client
// interceptors report each downstream call made with it and how long it
// took (the path's name is the connection's target unless
// [WithPathName] says otherwise), and a method belongs to the downstream
// it spends the most time calling ([github.com/moirai-go/moirai/fence.Classifier]). A method seen
// calling nothing, or not seen yet, is local. [WithPathOf] sets a call's
// path directly.
//
// The level travels in ordinary metadata ("moirai-level"), not in ORCA's
// endpoint-load-metrics-bin: ORCA's per-call report is a trailer carrying
// an xDS protobuf, which would add the xDS proto module to the library's
// dependencies and arrive only at the end of a call; a plain header arrives
// first and costs a few bytes.
package grpcmw

import "sync/atomic"

var untrusted atomic.Int64

// Untrusted returns how many moirai-priority values were ignored because
// their sender is not a trusted peer.
func Untrusted() int64 { return untrusted.Load() }

package httpmw

import (
	"net/http"
	"sync/atomic"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/tree"
)

// WithTree makes every request part of a request tree (see package
// github.com/moirai-go/moirai/tree): a request from a trusted peer
// ([WithTrustedPeer]) that names its tree in [tree.Header] joins it, any
// other request is the root of a new one, and the task's Spec.Tree says
// which. A request of a received tree that the controller cancels, or
// whose task is cancelled because its own downstream request was a
// culprit (through [Transport] with [WithTreeCancel]), is answered 503
// with the culprit answer in [tree.CulpritHeader]: the tree, the hop that
// decided (hop, for this service's decisions), its reason and the expected
// wait, so that the caller cancels its own task for the tree. A culprit
// header the handler itself passes on from a downstream is dropped: only
// the middleware answers for its hop. [WithReexecution] applies to the
// roots only: a request of a received tree is cancelled up the tree, not
// re-executed in the middle of it, and the root's re-execution waits the
// deciding hop's expected wait (moirai.Retry).
func WithTree(hop string) Option {
	return func(c *config) { c.SetTree(hop) }
}

// Peer is the downstream that answered a [Transport]'s request, for the
// trust function of [WithTreeCancelPeer].
type Peer struct {
	// Host is the request URL's host name or IP address, without port
	// or brackets ("b1.internal", "10.0.0.7", "::1").
	Host string
	// Port is the URL's port, or its scheme's default ("80" for http,
	// "443" for https).
	Port string
	// Request is the request answered (its URL, its context).
	Request *http.Request
}

// peerOf is the peer r was sent to.
func peerOf(r *http.Request) Peer {
	port := r.URL.Port()
	if port == "" {
		port = "80"
		if r.URL.Scheme == "https" {
			port = "443"
		}
	}
	return Peer{Host: r.URL.Hostname(), Port: port, Request: r}
}

// WithTreeCancelPeer turns on upward cancellation in a [Transport]: when
// a response is 503 with a culprit answer from a downstream trusted says
// is trusted, for the tree of the task in the request's context, ctl
// cancels that task (moirai.Controller.CancelTree), hence its other
// downstream requests. A culprit answer from a downstream not trusted
// (every one when trusted is nil: said at once in ctl's log), malformed,
// or naming another tree is ignored and counted ([ForgedCulprits] and
// ctl's moirai.Controller.TreeStats). The response is returned
// unchanged; tree.Of on the task's context's cause gives the culprit,
// and [Culprit] reads it from a response.
func WithTreeCancelPeer(ctl *moirai.Controller, trusted func(Peer) bool) TransportOption {
	return func(t *transport) { t.ctl, t.trustedDown = ctl, trusted }
}

// WithTreeCancel is [WithTreeCancelPeer] whose trust function gets the
// request URL's host as it is written, with its port when the URL has
// one ("b1.internal:8080"), without it otherwise.
//
// Deprecated: use WithTreeCancelPeer, whose Peer has the host and the
// port apart.
func WithTreeCancel(ctl *moirai.Controller, trusted func(host string) bool) TransportOption {
	if trusted == nil {
		return WithTreeCancelPeer(ctl, nil)
	}
	return WithTreeCancelPeer(ctl, func(p Peer) bool { return trusted(p.Request.URL.Host) })
}

var forgedCulprits, untrustedTrees atomic.Int64

// ForgedCulprits returns how many culprit answers were ignored:
// transports', from a downstream not trusted, malformed, or naming a tree
// other than the caller's task's; and handlers', passed on from a
// downstream as their own (stripped, see [WithTree]).
func ForgedCulprits() int64 { return forgedCulprits.Load() }

// UntrustedTrees returns how many tree identities handlers ignored: from
// a peer not trusted, or malformed.
func UntrustedTrees() int64 { return untrustedTrees.Load() }

// CulpritOf returns the culprit answer of a response, if it holds one that
// parses: for an application's own retry loop, which should not retry
// before its Wait. It does not say whether the answer is to be trusted.
// (For an error of a call through the middleware, see tree.Of.)
func CulpritOf(resp *http.Response) (*tree.Culprit, bool) {
	v := resp.Header[tree.CulpritHeader]
	if len(v) != 1 {
		return nil, false
	}
	return tree.ParseCulprit(v[0])
}

// Culprit is the former name of [CulpritOf].
//
// Deprecated: use CulpritOf; a function named Culprit read as the type
// tree.Culprit.
func Culprit(resp *http.Response) (*tree.Culprit, bool) { return CulpritOf(resp) }

// treeOf returns the tree r joins, and whether a trusted caller sent it
// (else it is a new tree's root).
func (h *handler) treeOf(r *http.Request, class string) (string, bool) {
	if v, ok := r.Header[tree.Header]; ok {
		if len(v) == 1 && tree.Parse(v[0]) && h.cfg.trusted != nil && h.cfg.trusted(r) {
			return v[0], true
		}
		untrustedTrees.Add(1)
	}
	return tree.New(class), false
}

// upward cancels tk when v, the culprit header of the response to r, is
// a culprit answer for its tree from a trusted downstream.
func (t *transport) upward(tk *moirai.Task, r *http.Request, v []string) {
	var cu *tree.Culprit
	ok := len(v) == 1
	if ok {
		cu, ok = tree.ParseCulprit(v[0])
	}
	if !ok || t.trustedDown == nil || tk == nil || tk.Spec().Tree != cu.Tree || !t.trustedDown(peerOf(r)) {
		forgedCulprits.Add(1)
		mwx.IgnoredCulprit(t.ctl)
		return
	}
	_ = t.ctl.CancelTree(tk, cu)
}

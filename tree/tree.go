// Package tree names the request tree a task serves across services, and
// carries a culprit cancellation from the service that decided it back up
// the tree to its root.
//
// moirai's controller acts inside one process. In a deployment of several
// services the culprit is often a request tree: a frontend request fans
// out to backends, and the contended resource is in one of them.
// Cancelling the sub-request there leaves the rest of the tree holding
// resources elsewhere, and the caller retries the failed call straight
// back into the same overload. Deadlines and cancellation already travel
// down a tree; this package is the other direction, and the tree's name.
//
// # The identity
//
// A tree's identity is its root's ID and class, "<id> <class>" ([New],
// [Split]): the entry service makes one per request, and the middleware
// (httpmw, grpcmw and their client sides) carries it downstream unchanged
// in [Header] / [Key], where a server honours it only from a trusted
// peer, as it honours priorities. A task's tree is its Spec.Tree.
//
// # The culprit answer
//
// When a service's controller cancels a task of a tree (as the culprit of
// an overload: moirai's policies cancel only tasks that hold what others
// wait for), the middleware answers the call with a [Culprit]: the tree,
// the hop that decided and why, and how long that hop expects a new run
// of the class to wait before it is served ([Culprit.Wait], from
// moirai.Controller.ExpectedWait). The caller's client middleware, when
// the answer comes from a trusted downstream and names the caller's own
// tree, cancels the caller's task with the Culprit as its cause, hence
// every other downstream call the task makes; the caller's own server
// middleware then answers its caller the same way, naming the same
// deciding hop, up to the root.
//
// # No retry into the overload
//
// A culprit answer is not retried: gRPC's retry policy is told not to
// (grpc-retry-pushback-ms), and moirai.Retry's re-execution of a task
// cancelled by a Culprit waits the answer's Wait first, then for its own
// resources' window. Ordinary failures keep their retries. Applications
// with their own retry loops read the wait with [Of].
//
// # Victims stay out
//
// Only a culprit answer cancels upward. A sub-request that was a victim
// somewhere (rejected by admission, shed, out of queue, past its deadline,
// or cancelled because its own caller was) answers an ordinary error, and
// its tree is not touched by this path. An answer that names another tree
// than the caller's, or comes from an untrusted downstream, is ignored and
// counted (the middleware's Forged counters).
package tree

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// Header is the HTTP header, and Key the gRPC metadata key, that carry a
// tree's identity downstream.
const (
	Header = "Moirai-Tree"
	Key    = "moirai-tree"
)

// CulpritHeader is the HTTP response header of a culprit answer (see
// [Culprit.Format]).
const CulpritHeader = "Moirai-Culprit"

// Bounds of the wire formats.
const (
	MaxID     = 32  // bytes of a tree's ID
	MaxClass  = 128 // bytes of the root's class
	MaxHop    = 64  // bytes of a hop's name
	MaxReason = 256 // bytes of a culprit's reason
	// MaxWait bounds the wait a culprit answer can impose.
	MaxWait = time.Hour
)

// nonce makes the IDs of one process unlike another's.
var nonce = func() uint64 {
	// The start's nanoseconds, mixed: distinct between processes, not
	// secret (the identity is honoured only from trusted peers).
	x := uint64(time.Now().UnixNano())
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}()

var seq atomic.Uint64

// New returns the identity of a new tree whose root is of class (cut to
// MaxClass bytes, with bytes outside printable ASCII replaced by '_'). It
// allocates the identity's string once; carrying it is free.
func New(class string) string {
	n := seq.Add(1)
	var b [MaxID + 1 + MaxClass]byte
	out := strconv.AppendUint(b[:0], nonce, 36)
	out = append(out, '.')
	out = strconv.AppendUint(out, n, 36)
	out = append(out, ' ')
	for i := 0; i < len(class) && i < MaxClass; i++ {
		c := class[i]
		if c < 0x20 || c > 0x7e || c == ';' {
			c = '_'
		}
		out = append(out, c)
	}
	return string(out)
}

// Split returns the ID and the root's class of a well-formed identity
// (see [Parse]).
func Split(v string) (id, class string) {
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// Parse reports whether v is a well-formed identity: an ID of 1 to MaxID
// bytes of [0-9a-z.], a space, a class of at most MaxClass bytes of
// printable ASCII but ';'. It does not allocate.
func Parse(v string) bool {
	// One pass: the ID up to the first space, then the class.
	i := 0
	for ; i < len(v) && v[i] != ' '; i++ {
		c := v[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '.') {
			return false
		}
	}
	if i == 0 || i > MaxID || i == len(v) || len(v)-i-1 > MaxClass {
		return false
	}
	for _, c := range []byte(v[i+1:]) {
		if c < 0x20 || c > 0x7e || c == ';' {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ErrCulprit is wrapped by every [Culprit].
var ErrCulprit = errors.New("tree: request tree cancelled as a culprit")

// Culprit is a culprit answer, and the cause with which a caller's task
// is cancelled on receiving one (wrapped with moirai.ErrCancelled).
type Culprit struct {
	Tree   string        // the tree's identity (see [New])
	Hop    string        // the service whose controller decided
	Reason string        // its controller's reason
	Wait   time.Duration // how long the deciding hop expects a new run to wait
}

// Error says which tree, which hop decided and why.
func (c *Culprit) Error() string {
	id, _ := Split(c.Tree)
	return "tree: request tree " + id + " cancelled as a culprit at " + c.Hop + " (" + c.Reason + "); expected wait " + c.Wait.String()
}

// Unwrap returns [ErrCulprit].
func (c *Culprit) Unwrap() error { return ErrCulprit }

// Of returns the Culprit in err's chain, if any: for an application's own
// retry loop, which should not retry before c.Wait.
func Of(err error) (*Culprit, bool) {
	var c *Culprit
	ok := errors.As(err, &c)
	return c, ok
}

// Answer returns the culprit answer a hop named hop gives for a task of
// tree that its controller cancelled for reason, expecting a new run to
// wait wait; the reason is cut to MaxReason bytes and non-printable bytes
// (and in the hop, spaces and ';') are replaced, the wait bounded by [0, MaxWait].
func Answer(tree, hop, reason string, wait time.Duration) *Culprit {
	if hop == "" {
		hop = "unnamed"
	}
	return &Culprit{Tree: tree, Hop: clean(hop, MaxHop, true), Reason: clean(reason, MaxReason, false), Wait: min(max(wait, 0), MaxWait)}
}

// clean cuts s to n bytes and replaces non-printable bytes (and, for a
// token, spaces) by '_'.
func clean(s string, n int, token bool) string {
	if len(s) > n {
		s = s[:n]
	}
	if printable(s) && (!token || !hasSpace(s) && !hasByte(s, ';')) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || token && (c == ' ' || c == ';') {
			b[i] = '_'
		}
	}
	return string(b)
}

func hasSpace(s string) bool { return hasByte(s, ' ') }

func hasByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

// Format returns the answer's HTTP header value:
// "<id> <class>;<wait-ms>;<hop>;<reason>" (an identity holds no ';').
func (c *Culprit) Format() string {
	return c.Tree + ";" + strconv.FormatInt(c.Wait.Milliseconds(), 10) + ";" + c.Hop + ";" + c.Reason
}

// ParseCulprit parses what [Culprit.Format] writes. It reports false for
// anything else: a malformed identity, a wait that is not 0 to MaxWait in
// milliseconds, an empty or over-long hop, a hop with a space, an
// over-long reason, bytes outside printable ASCII.
func ParseCulprit(v string) (*Culprit, bool) {
	treeV, rest, ok := cut(v)
	if !ok || !Parse(treeV) {
		return nil, false
	}
	waitS, rest, ok := cut(rest)
	if !ok || len(waitS) == 0 || len(waitS) > 7 || !allDigits(waitS) {
		return nil, false
	}
	hop, reason, ok := cut(rest)
	if !ok || len(hop) == 0 || len(hop) > MaxHop || hasSpace(hop) || len(reason) > MaxReason || !printable(hop) || !printable(reason) {
		return nil, false
	}
	ms, _ := strconv.ParseInt(waitS, 10, 64)
	if time.Duration(ms)*time.Millisecond > MaxWait {
		return nil, false
	}
	return &Culprit{Tree: treeV, Hop: hop, Reason: reason, Wait: time.Duration(ms) * time.Millisecond}, true
}

func cut(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

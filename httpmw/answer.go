package httpmw

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/tree"
)

// The one answer path: every response a Handler writes — the handler's
// own, served directly; a run's buffered answer, committed once the run
// is known to be kept; a rejection by admission or by a fence; the 503 of
// a cancelled or dropped request — goes through an answer, which applies
// the header rules once, just before the header is sent:
//
//   - Every response header named Moirai-… is this hop's own. What the
//     handler set (typically a reverse proxy copying its downstream's
//     answer: a culprit answer, an admission level) is removed.
//   - This hop then sets its own: its admission level, when it runs
//     admission ([WithAdmission]), and, when the request's tree came from
//     a trusted caller and its task was cancelled as a culprit, the
//     culprit answer ([WithTree]).
//
// A handler that returns without writing gets the same rules applied to
// the header net/http then sends.

// answer is the ResponseWriter a Handler gives its handler, and the one
// its own answers are written to. It records the status written.
type answer struct {
	http.ResponseWriter
	ctl      *moirai.Controller // counts the culprit answers a handler passes on
	status   int
	sealed   bool
	hijacked bool
	level    string // this hop's admission level, "" without admission
	// The request's task, for the hop's culprit answer: set with a tree.
	tree   *handler
	ctx    context.Context
	treeIn bool // the request's tree came from its caller
	// A task begun before its class was known (lazy.go): the Handler,
	// the request as it came, and the copy the mux serves, once made.
	pend   taskx.Pending
	lazyH  *handler
	in     *http.Request
	served *http.Request
}

// answers recycles the answers of requests that are over: one allocation
// less per request. A handler must not use its ResponseWriter once it has
// returned (net/http's rule), so an answer is reused only after the
// handler it served has.
var answers = sync.Pool{New: func() any { return new(answer) }}

// newAnswer returns an answer writing to rw, from the pool.
func newAnswer(rw http.ResponseWriter, ctl *moirai.Controller) *answer {
	a := answers.Get().(*answer)
	a.ResponseWriter, a.ctl = rw, ctl
	return a
}

// release returns a to the pool, forgetting the request.
func (a *answer) release() {
	*a = answer{}
	answers.Put(a)
}

// moiraiPrefix is the canonical prefix of every moirai header.
const moiraiPrefix = "Moirai-"

// seal applies the header rules to the header about to be sent.
func (a *answer) seal() {
	if a.sealed {
		return
	}
	a.sealed = true
	a.rules()
}

// rules removes the moirai headers the handler set and sets the hop's own.
func (a *answer) rules() {
	hd := a.ResponseWriter.Header()
	if len(hd) == 0 && a.level == "" && a.tree == nil {
		return // nothing to remove, nothing to set
	}
	for k := range hd {
		if hasMoiraiPrefix(k) {
			if http.CanonicalHeaderKey(k) == tree.CulpritHeader {
				// A downstream's answer (a proxy copies its headers):
				// not this hop's, and not to be acted on by its caller.
				forgedCulprits.Add(1)
				mwx.IgnoredCulprit(a.ctl)
			}
			delete(hd, k)
		}
	}
	if a.level != "" {
		hd[HeaderLevel] = []string{a.level}
	}
	if a.tree != nil {
		if v := a.tree.culpritOf(a.ctx, a.treeIn); v != "" {
			hd[tree.CulpritHeader] = []string{v}
		}
	}
}

// hasMoiraiPrefix reports whether the header name k is a moirai header,
// whatever its case (a handler may set the map directly).
func hasMoiraiPrefix(k string) bool {
	return len(k) >= len(moiraiPrefix) && strings.EqualFold(k[:len(moiraiPrefix)], moiraiPrefix)
}

func (a *answer) WriteHeader(code int) {
	switch {
	case a.status != 0:
	case code >= 200 || code == http.StatusSwitchingProtocols:
		a.status = code
		a.seal()
	default:
		a.rules() // an informational answer (103 Early Hints) sends a header too
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
		a.seal()
	}
	return a.ResponseWriter.Write(b)
}

// Flush passes a flush on, when the underlying writer can.
func (a *answer) Flush() {
	if a.status == 0 {
		a.status = http.StatusOK
		a.seal()
	}
	_ = http.NewResponseController(a.ResponseWriter).Flush()
}

// Hijack passes a hijack on: the connection is the handler's from then
// on, and nothing more is answered.
func (a *answer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(a.ResponseWriter).Hijack()
	if err == nil {
		a.hijacked, a.sealed = true, true
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// finish applies the rules to the header net/http sends for a handler
// that returned without writing.
func (a *answer) finish() {
	if a.status == 0 && !a.hijacked {
		a.seal()
	}
}

// culpritOf is the culprit answer of a request whose task's context is
// ctx: the hop's own answer when the request's tree came from its caller
// (in) and the task was cancelled as a culprit, else "".
func (h *handler) culpritOf(ctx context.Context, in bool) string {
	if !in || !errors.Is(context.Cause(ctx), moirai.ErrCancelled) {
		return ""
	}
	if cu, ok := h.ctl.CulpritAnswer(ctx, h.cfg.Hop); ok {
		return cu.Format()
	}
	return ""
}

package httpmw

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/tree"
)

// maxRetryAfter bounds the Retry-After of a cancelled request.
const maxRetryAfter = time.Hour

// retryAfter is the Retry-After, in whole seconds (at least 1), of a
// cancelled request of class: the class's expected wait (see
// moirai.Controller.ExpectedWait), so that a client does not resend a
// multi-second report at once.
func retryAfter(ctl *moirai.Controller, class string) string {
	d := min(ctl.ExpectedWait(class), maxRetryAfter)
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// rejectCancelled answers a request the controller cancelled (and did not
// re-execute), ctx the request's context: 503 with the class's expected
// wait as Retry-After. The body says only that the server is overloaded,
// unless WithExposedCause adds the reason; the reason stays in the
// context's cause for the application (and in the decision log).
func (h *handler) rejectCancelled(w *answer, ctx context.Context, class string) {
	h.rejectCancelledErr(w, context.Cause(ctx), class)
}

// rejectCancelledErr is rejectCancelled with the reason given.
func (h *handler) rejectCancelledErr(w *answer, cause error, class string) {
	w.Header().Set("Retry-After", retryAfter(h.ctl, class))
	msg := "server overloaded"
	if h.cfg.ExposeCause && cause != nil {
		msg += ": " + cause.Error()
	}
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// rejectCulprit answers a request of a tree whose task was cancelled as a
// culprit (here, or below): 503 and the Retry-After of the larger of the
// class's expected wait and the deciding hop's. The answer adds the
// culprit answer for a caller that sent the tree (see answer.go).
func rejectCulprit(w *answer, ctl *moirai.Controller, class string, cu *tree.Culprit) {
	d := min(max(ctl.ExpectedWait(class), cu.Wait), maxRetryAfter)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
	http.Error(w, "server overloaded", http.StatusServiceUnavailable)
}

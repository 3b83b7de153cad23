package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
)

// A cancelled request gets 503 with its class's expected wait as
// Retry-After and a body that does not carry the reason; the handler still
// reads the reason from the context's cause.
func TestCancelledAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &cancelClass{class: "report"}
		ctl := moirai.New(moirai.WithPolicy(p), moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
		defer ctl.Close()
		p.done.Store(true) // learn first: 3 s reports that complete
		var cause error
		h := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				cause = context.Cause(r.Context())
			}
		}), httpmw.WithClass(func(*http.Request) string { return "report" }))
		for range 3 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/report", nil))
			time.Sleep(20 * time.Millisecond)
		}
		p.done.Store(false)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/report", nil))
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d", w.Code)
		}
		if ra := w.Header().Get("Retry-After"); ra != "3" && ra != "4" {
			t.Errorf("Retry-After %q; want the class's expected wait, about 3 s", ra)
		}
		if body := w.Body.String(); strings.Contains(body, "test") || !strings.Contains(body, "overloaded") {
			t.Errorf("body %q", body)
		}
		if !errors.Is(cause, moirai.ErrCancelled) {
			t.Errorf("cause %v", cause)
		}
	})
}

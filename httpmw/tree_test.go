package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/tree"
)

// hop is one service of a test chain: its controller, its server, and a
// client whose transport carries trees and cancels upward.
type hop struct {
	ctl    *moirai.Controller
	srv    *httptest.Server
	client *http.Client
	cause  chan error // the cause of each task's context when its handler returns
}

func newHop(t *testing.T, name string, trusted func(host string) bool, serve func(h *hop, w http.ResponseWriter, r *http.Request)) *hop {
	h := &hop{ctl: moirai.New(moirai.WithoutMechanisms()), cause: make(chan error, 16)}
	t.Cleanup(func() { h.ctl.Close() })
	h.client = &http.Client{Transport: httpmw.Transport(nil, httpmw.WithoutLocalShedding(), httpmw.WithTreeCancel(h.ctl, trusted))}
	h.srv = httptest.NewServer(httpmw.Handler(h.ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(h, w, r)
		h.cause <- context.Cause(r.Context())
	}), httpmw.WithTree(name), httpmw.WithTrustedPeer(func(*http.Request) bool { return true })))
	t.Cleanup(h.srv.Close)
	t.Cleanup(h.client.CloseIdleConnections)
	return h
}

func (h *hop) get(ctx context.Context, u string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := h.client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestTreeHTTP: back cancels its task as a culprit; mid and front, which
// called it, cancel theirs naming back, and front's other request (to
// slow) is cancelled with it.
//
// back decides only once slow's handler has been reached: front's two
// calls start at once, and a decision that came before the call to slow
// was sent would cancel it on the client (in the dial, under -race on a
// loaded machine, about once in a hundred runs) without slow's handler
// ever running, which is right but not the case under test.
func TestTreeHTTP(t *testing.T) {
	all := func(string) bool { return true }
	slowIn := make(chan struct{})
	back := newHop(t, "back", all, func(h *hop, w http.ResponseWriter, r *http.Request) {
		select {
		case <-slowIn:
		case <-time.After(20 * time.Second):
			t.Error("slow's handler never reached")
		}
		if err := h.ctl.Cancel(moirai.From(r.Context()).ID(), "holds the table lock"); err != nil {
			t.Error(err)
		}
		<-r.Context().Done()
	})
	slow := newHop(t, "slow", all, func(h *hop, w http.ResponseWriter, r *http.Request) {
		close(slowIn)
		<-r.Context().Done()
	})
	mid := newHop(t, "mid", all, func(h *hop, w http.ResponseWriter, r *http.Request) {
		resp, err := h.get(r.Context(), back.srv.URL)
		if err == nil {
			w.WriteHeader(resp.StatusCode)
		}
	})
	front := newHop(t, "front", all, func(h *hop, w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.get(r.Context(), slow.srv.URL)
		}()
		h.get(r.Context(), mid.srv.URL)
		<-done
	})
	resp, err := http.Get(front.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(tree.CulpritHeader) != "" {
		t.Fatalf("root's answer %d, culprit header %q: want 503 without it (the client sent no tree)", resp.StatusCode, resp.Header.Get(tree.CulpritHeader))
	}
	cause := func(h *hop) error {
		select {
		case c := <-h.cause:
			return c
		case <-time.After(20 * time.Second):
			t.Fatalf("%s's handler never returned", h.srv.URL)
			return nil
		}
	}
	for _, h := range []*hop{front, mid} {
		cause := cause(h)
		if cu, ok := tree.Of(cause); !ok || cu.Hop != "back" || !strings.Contains(cu.Reason, "holds the table lock") || !errors.Is(cause, moirai.ErrCancelled) {
			t.Fatalf("%s's cause %v; want a culprit decided at back", h.srv.URL, cause)
		}
	}
	if cause := cause(slow); cause == nil || errors.Is(cause, moirai.ErrCancelled) {
		t.Fatalf("slow's cause %v; want its caller's cancellation", cause)
	}
	cause(back)
}

// TestTreeHTTPForged: a culprit answer from an untrusted host, or naming
// another tree, cancels nothing and is counted.
func TestTreeHTTPForged(t *testing.T) {
	var answer string
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(tree.CulpritHeader, answer)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer rogue.Close()
	ru, _ := url.Parse(rogue.URL)
	for _, tc := range []struct {
		name    string
		trusted bool
		other   bool
	}{{"untrusted", false, false}, {"another tree", true, true}, {"malformed", true, false}} {
		ctl := moirai.New(moirai.WithoutMechanisms())
		c := &http.Client{Transport: httpmw.Transport(nil, httpmw.WithTreeCancel(ctl, func(host string) bool { return tc.trusted && host == ru.Host }))}
		ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Cancellable: true, Tree: tree.New("/mine")})
		answer = tree.Answer(tk.Spec().Tree, "rogue", "forged", 0).Format()
		if tc.other {
			answer = tree.Answer(tree.New("/other"), "rogue", "forged", 0).Format()
		} else if tc.trusted {
			answer = tk.Spec().Tree + ";soon;rogue;forged"
		}
		before := httpmw.ForgedCulprits()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rogue.URL, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
		if tk.Cancelled() || httpmw.ForgedCulprits() != before+1 {
			t.Errorf("%s: cancelled %v, forged %d -> %d", tc.name, tk.Cancelled(), before, httpmw.ForgedCulprits())
		}
		tk.End(nil)
		c.CloseIdleConnections()
		ctl.Close()
	}
}

// TestTreeHTTPNotReexecutedMidTree: a handler with re-execution, in the
// middle of a tree, does not re-execute a run cancelled as a culprit: it
// answers up the tree at once, and the root's task is cancelled.
func TestTreeHTTPNotReexecutedMidTree(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	var runs atomic.Int64
	mid := httptest.NewServer(httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := ctl.Cancel(moirai.From(r.Context()).ID(), "holds the lock"); err != nil {
			t.Error(err)
		}
		<-r.Context().Done()
	}), httpmw.WithTree("mid"), httpmw.WithReexecution(), httpmw.WithTrustedPeer(func(*http.Request) bool { return true })))
	defer mid.Close()
	front := moirai.New(moirai.WithoutMechanisms())
	defer front.Close()
	c := &http.Client{Transport: httpmw.Transport(nil, httpmw.WithTreeCancel(front, func(string) bool { return true }))}
	defer c.CloseIdleConnections()
	ctx, tk := front.Begin(t.Context(), moirai.Spec{Cancellable: true, Tree: tree.New("/front")})
	defer tk.End(nil)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mid.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cu, ok := tree.Of(context.Cause(ctx)); !ok || cu.Hop != "mid" || runs.Load() != 1 {
		t.Fatalf("root's cause %v after %d run(s) at mid; want a culprit at mid after one", context.Cause(ctx), runs.Load())
	}
}

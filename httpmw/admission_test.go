package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/httpmw"
)

// overloaded returns a DAGOR whose level rejects the lowest priority.
func overloaded(t *testing.T) *admit.DAGOR {
	d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10))
	for w := 0; w < 30; w++ {
		for i := 0; i < 10; i++ {
			d.AdmitPriority(0, moirai.Priority{})
			d.AdmitPriority(0, httpmw.Lowest)
			d.Started(0, time.Second)
		}
	}
	if d.Level().Admits(httpmw.Lowest) || !d.Level().Admits(moirai.Priority{}) {
		t.Fatalf("level %v: setup failed", d.Level())
	}
	return d
}

func priorityHandler(ctl *moirai.Controller, seen *moirai.Priority, opts ...httpmw.Option) http.Handler {
	return httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = moirai.From(r.Context()).Spec().Priority
	}), opts...)
}

// TestClientCannotRaiseItsPriority: a client that is not a trusted peer
// sends the most important priority; it is ignored and counted, and the
// entry service's own assignment wins.
func TestClientCannotRaiseItsPriority(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	assigned := moirai.Priority{Business: 9, User: 90}
	var seen moirai.Priority
	h := priorityHandler(ctl, &seen,
		httpmw.WithPriority(func(*http.Request) moirai.Priority { return assigned }),
		httpmw.WithTrustedPeer(func(r *http.Request) bool { return r.RemoteAddr == "10.0.0.1:1" }))
	before := httpmw.Untrusted()
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	r.Header.Set(httpmw.HeaderPriority, "0/0")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != assigned {
		t.Fatalf("untrusted client ran at %v, want the assigned %v", seen, assigned)
	}
	if httpmw.Untrusted()-before != 1 {
		t.Fatal("ignored header not counted")
	}
	// The same header from a trusted peer is honoured.
	r.RemoteAddr = "10.0.0.1:1"
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != (moirai.Priority{}) {
		t.Fatalf("trusted peer ran at %v, want 0/0", seen)
	}
	// A malformed header from a trusted peer falls back to the assignment.
	r.Header.Set(httpmw.HeaderPriority, "-1/99999")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != assigned {
		t.Fatalf("malformed header ran at %v", seen)
	}
	// By default nobody is trusted.
	h = priorityHandler(ctl, &seen)
	r.Header.Set(httpmw.HeaderPriority, "0/0")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != httpmw.Lowest {
		t.Fatalf("default ran at %v, want Lowest", seen)
	}
}

func TestAdmissionRejectsWith503AndLevel(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	d := overloaded(t)
	var seen moirai.Priority
	h := priorityHandler(ctl, &seen, httpmw.WithAdmission(d),
		httpmw.WithPriority(func(r *http.Request) moirai.Priority {
			if r.URL.Path == "/pay" {
				return moirai.Priority{}
			}
			return httpmw.Lowest
		}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/feed", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("lowest priority: %d %v, want 503 with Retry-After", w.Code, w.Header())
	}
	if w.Header().Get(httpmw.HeaderLevel) != admit.FormatLevel(d.Level()) {
		t.Fatalf("rejection carries level %q", w.Header().Get(httpmw.HeaderLevel))
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/pay", nil))
	if w.Code != http.StatusOK || w.Header().Get(httpmw.HeaderLevel) == "" {
		t.Fatalf("top priority: %d, level %q", w.Code, w.Header().Get(httpmw.HeaderLevel))
	}
}

// TestTransportShedsLocallyAndExpires: the client caches the level the
// server returned, sheds what it would reject, sends the rest with the
// task's priority, and forgets the level after its TTL.
func TestTransportShedsLocallyAndExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		d := overloaded(t)
		sent := 0
		var got string
		srv := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
			httpmw.WithAdmission(d), httpmw.WithTrustedPeer(func(*http.Request) bool { return true }))
		base := serveInline(srv, httpmw.HeaderPriority, &sent, &got)
		c := &http.Client{Transport: httpmw.Transport(base, httpmw.WithLevelTTL(time.Second))}
		call := func(p moirai.Priority) error {
			ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: p})
			defer tk.End(nil)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://down.example/x", nil)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		if err := call(httpmw.Lowest); err != nil || sent != 1 {
			t.Fatalf("first call: %v, sent %d", err, sent)
		}
		if got != admit.FormatPriority(httpmw.Lowest) {
			t.Fatalf("priority header %q", got)
		}
		if err := call(httpmw.Lowest); !errors.Is(err, httpmw.ErrShed) || sent != 1 {
			t.Fatalf("second call: %v, sent %d; want ErrShed without sending", err, sent)
		}
		if err := call(moirai.Priority{}); err != nil || sent != 2 {
			t.Fatalf("important call: %v, sent %d", err, sent)
		}
		time.Sleep(2 * time.Second) // the cached level expires
		// d stays overloaded, so the request is sent and rejected remotely.
		if err := call(httpmw.Lowest); err != nil || sent != 3 {
			t.Fatalf("after expiry: %v, sent %d; want sent", err, sent)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serveInline is a transport that serves each request with srv in the
// caller's goroutine, counting them in sent and keeping the last one's
// header in got.
func serveInline(srv http.Handler, header string, sent *int, got *string) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		*sent++
		*got = r.Header.Get(header)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w.Result(), nil
	}
}

// FuzzPriorityHeader: whatever a trusted peer sends, the request runs at a
// valid priority: the parsed one or the assigned fallback.
func FuzzPriorityHeader(f *testing.F) {
	for _, s := range []string{"0/0", "63/127", "", "64/0", "1/2/3", "\xff\xfe", "00000000000001/1"} {
		f.Add(s)
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	var seen moirai.Priority
	h := priorityHandler(ctl, &seen, httpmw.WithTrustedPeer(func(*http.Request) bool { return true }))
	f.Fuzz(func(t *testing.T, s string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header[httpmw.HeaderPriority] = []string{s}
		h.ServeHTTP(httptest.NewRecorder(), r)
		p, ok := admit.ParsePriority(s)
		if !ok {
			p = httpmw.Lowest
		}
		if seen != p {
			t.Fatalf("header %q ran at %v, want %v", s, seen, p)
		}
	})
}

// TestContinuation: once a request of a task is admitted, the transport
// marks the task and sends its next requests as continuations, past local
// shedding; a server that trusts the peer admits them at the level before
// its last cut, one that does not ignores the mark.
func TestContinuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		mid := moirai.Priority{Business: 5, User: 5}
		for _, trusted := range []bool{true, false} {
			d := admit.NewDAGOR(admit.WithWindow(time.Hour, 10), admit.WithGrace(time.Hour))
			for i := 0; i < 10; i++ { // one overloaded window: a cut from fully open
				d.AdmitPriority(0, moirai.Priority{})
				d.AdmitPriority(0, httpmw.Lowest)
				d.Started(0, time.Second)
			}
			if d.Level().Admits(mid) {
				t.Fatalf("level %v after the cut admits %v", d.Level(), mid)
			}
			// Untrusted callers' priorities are the server's to assign.
			opts := []httpmw.Option{httpmw.WithAdmission(d), httpmw.WithPriority(func(*http.Request) moirai.Priority { return mid })}
			if trusted {
				opts = append(opts, httpmw.WithTrustedPeer(func(*http.Request) bool { return true }))
			}
			srv := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), opts...)
			sent, cont := 0, ""
			base := serveInline(srv, httpmw.HeaderContinuation, &sent, &cont)
			c := &http.Client{Transport: httpmw.Transport(base)}
			do := func(ctx context.Context) int {
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://down.example/x", nil)
				resp, err := c.Do(req)
				if errors.Is(err, httpmw.ErrShed) {
					return 0 // shed locally
				}
				if err != nil {
					t.Fatalf("trusted %v: %v", trusted, err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			// A task whose first request is admitted gets marked.
			if trusted {
				ctx, top := ctl.Begin(t.Context(), moirai.Spec{})
				if code := do(ctx); code != http.StatusOK || !top.AdmittedDownstream() || cont != "" {
					t.Fatalf("first request %d, marked %v, continuation header %q", code, top.AdmittedDownstream(), cont)
				}
				top.End(nil)
			}
			// A request refused (by the server, or locally once the level
			// is cached) does not mark its task.
			ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Priority: mid})
			if code := do(ctx); (code != http.StatusServiceUnavailable && code != 0) || tk.AdmittedDownstream() {
				t.Fatalf("trusted %v: request above the level: %d, marked %v", trusted, code, tk.AdmittedDownstream())
			}
			// Marked (an earlier call got through elsewhere), it goes out
			// as a continuation past the cached level.
			tk.MarkAdmittedDownstream()
			before := sent
			code := do(ctx)
			tk.End(nil)
			if sent != before+1 || cont != "1" {
				t.Fatalf("trusted %v: continuation sent %d, header %q", trusted, sent-before, cont)
			}
			if want := map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[trusted]; code != want {
				t.Fatalf("trusted %v: continuation answered %d, want %d", trusted, code, want)
			}
		}
	})
}

// TestTransportLevelsBounded: a transport caches the levels of at most
// MaxLevelHosts downstream hosts, whatever hosts requests send it to;
// the ones past the cap are counted.
func TestTransportLevelsBounded(t *testing.T) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{httpmw.HeaderLevel: {"0/0"}}, Body: http.NoBody}, nil
	})
	c := &http.Client{Transport: httpmw.Transport(base)}
	before := httpmw.UncachedLevels()
	const hosts = httpmw.MaxLevelHosts + 100
	for i := range hosts {
		resp, err := c.Get(fmt.Sprintf("http://h%d.invalid/", i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := httpmw.UncachedLevels() - before; got != 100 {
		t.Errorf("%d levels not cached, want 100 (the hosts past the cap)", got)
	}
	// A cached host's level is used: a low-priority request to it is shed.
	if _, err := c.Get("http://h0.invalid/"); !errors.Is(err, httpmw.ErrShed) {
		t.Errorf("a cached host's level 0/0: %v, want ErrShed", err)
	}
	// A host past the cap is sent to.
	if _, err := c.Get(fmt.Sprintf("http://h%d.invalid/", hosts-1)); err != nil {
		t.Errorf("a host past the cap: %v, want sent", err)
	}
}

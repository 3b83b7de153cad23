package httpmw_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/httpmw"
)

// TestFenceIsolatesAStalledPath: the upstream learns that /remote calls
// the downstream; with the downstream stalled, /remote requests hold at
// most their path's permit and queue in its bounded line (the overflow
// gets 503), while /local requests keep running.
func TestFenceIsolatesAStalledPath(t *testing.T) {
	hold := make(chan struct{})
	stall := make(chan bool, 1)
	stall <- false
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := <-stall
		stall <- s
		if s {
			<-hold
		}
		io.WriteString(w, "ok")
	}))
	defer down.Close()
	host := mustHost(t, down.URL)

	f, err := fence.New(4, []fence.Reservation{{Name: host, Permits: 1}}, fence.WithBacklog(1))
	if err != nil {
		t.Fatal(err)
	}
	cls := fence.NewClassifier(f)
	client := &http.Client{Transport: httpmw.Transport(nil)}
	mux := http.NewServeMux()
	mux.HandleFunc("/remote", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, down.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local") })
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	up := httptest.NewServer(httpmw.Handler(ctl, mux, httpmw.WithFence(cls)))
	defer up.Close()
	defer client.CloseIdleConnections()
	get := func(ctx context.Context, path string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	ctx := t.Context()
	if code := get(ctx, "/remote"); code != http.StatusOK {
		t.Fatalf("first /remote: %d", code)
	}
	if got := cls.PathOf("GET /remote").Name(); got != host {
		t.Fatalf("/remote's path %q, want %q", got, host)
	}
	<-stall
	stall <- true
	codes := make(chan int, 2)
	for range 2 { // one runs and stalls, one waits in the line
		go func() { codes <- get(ctx, "/remote") }()
	}
	p := f.Path(host)
	waitUntil(t, func() bool { return p.Running() == 1 && p.Waiting() == 1 })
	if code := get(ctx, "/remote"); code != http.StatusServiceUnavailable {
		t.Errorf("/remote with its line full: %d, want 503", code)
	}
	for range 5 {
		if code := get(ctx, "/local"); code != http.StatusOK {
			t.Fatalf("/local while the path is stalled: %d", code)
		}
	}
	<-stall
	stall <- false
	close(hold)
	for range 2 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("stalled /remote: %d, want 200 once the downstream is back", code)
		}
	}
	waitUntil(t, func() bool { return f.Stats().Paths[1].InUse == 0 && f.Stats().Paths[0].InUse == 0 })
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
	}
}

func okResponse(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
}

// catchAll is a mux whose handlers make one downstream call, on "d1",
// through the middleware's Transport.
func catchAll() *http.ServeMux {
	client := &http.Client{Transport: httpmw.Transport(roundTripFunc(okResponse),
		httpmw.WithPathName(func(*http.Request) string { return "d1" }))}
	call := func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://d1.invalid/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		io.WriteString(w, moirai.From(r.Context()).Spec().Class)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", call)
	mux.HandleFunc("/", call)
	return mux
}

// TestDefaultClassIsTheRoutePattern: by default a request's class is its
// route's pattern, not its raw path, so distinct IDs in paths neither
// grow the classifier nor show on the live page.
func TestDefaultClassIsTheRoutePattern(t *testing.T) {
	f, err := fence.New(8, []fence.Reservation{{Name: "d1", Permits: 4}})
	if err != nil {
		t.Fatal(err)
	}
	cls := fence.NewClassifier(f)
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	h := httpmw.Handler(ctl, catchAll(), httpmw.WithFence(cls))
	for i := range 200 {
		for _, path := range []string{fmt.Sprintf("/users/%d", i), fmt.Sprintf("/anything/%d", i)} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", path, w.Code, w.Body)
			}
			if i == 0 {
				t.Logf("%s: class %q", path, w.Body)
			}
		}
	}
	want := map[string]string{"GET /users/{id}": "d1", "GET /": "d1"}
	if d := cmp.Diff(want, cls.Routes()); d != "" {
		t.Errorf("learned routes (-want +got):\n%s", d)
	}
}

// BenchmarkFenceDistinctPaths is a request per distinct path
// (/users/0, /users/1, ...) through WithFence and a catch-all handler
// making one downstream call: run with -benchtime=50000x for 50k
// distinct paths. "default" classes requests by route pattern;
// "raw-path" by method and raw path (WithClass), where only the
// classifier's cap bounds the kinds.
func BenchmarkFenceDistinctPaths(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []httpmw.Option
	}{
		{"default", nil},
		{"raw-path", []httpmw.Option{httpmw.WithClass(func(r *http.Request) string { return r.Method + " " + r.URL.Path })}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := fence.New(8, []fence.Reservation{{Name: "d1", Permits: 4}})
			if err != nil {
				b.Fatal(err)
			}
			cls := fence.NewClassifier(f)
			ctl := moirai.New(moirai.WithoutMechanisms())
			defer ctl.Close()
			mux := http.NewServeMux()
			client := &http.Client{Transport: httpmw.Transport(roundTripFunc(okResponse),
				httpmw.WithPathName(func(*http.Request) string { return "d1" }))}
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://d1.invalid/", nil)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			})
			h := httpmw.Handler(ctl, mux, append(bc.opts, httpmw.WithFence(cls))...)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/users/"+strconv.Itoa(i), nil)
				h.ServeHTTP(w, r)
				i++
			}
			b.ReportMetric(float64(len(cls.Routes())), "kinds")
		})
	}
}

// FuzzDefaultClass: whatever method and path a client sends, the default
// class is one of a fixed set, a route's pattern behind a known method
// (or OTHER): a client cannot make up classes.
func FuzzDefaultClass(f *testing.F) {
	for _, s := range [][2]string{{"GET", "/users/1"}, {"BREW", "/users/2"}, {"GET", "/x/../users/3"}, {"POST", "/"}, {"get", "//a"}, {"GET", "/users/%zz"}} {
		f.Add(s[0], s[1])
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	var seen string
	record := func(_ http.ResponseWriter, r *http.Request) { seen = moirai.From(r.Context()).Spec().Class }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", record)
	mux.HandleFunc("/", record)
	h := httpmw.Handler(ctl, mux)
	allowed := map[string]bool{"GET /users/{id}": true}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "OTHER"} {
		allowed[m+" /"] = true
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r, err := http.NewRequest(method, "http://example.com/", nil)
		if err != nil {
			return // not a request net/http would build
		}
		r.URL.Path = path
		seen = ""
		h.ServeHTTP(httptest.NewRecorder(), r)
		if seen != "" && !allowed[seen] {
			t.Fatalf("%q %q: class %q, not one of the routes' classes", method, path, seen)
		}
	})
}

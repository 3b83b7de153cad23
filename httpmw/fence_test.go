package httpmw_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

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
	ctl := moirai.New(moirai.WithTraceOnly())
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

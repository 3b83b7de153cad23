package httpmw_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/tree"
)

// TestLaunderedCulpritIsIgnored is the laundering chain C → S → D: S is a
// reverse proxy with WithTree and WithReexecution that does not trust C
// (each of its requests is a tree's root, so S re-executes), C trusts S
// as a downstream, and D, the attacker, answers 503 with a culprit answer
// naming the tree it received (C's, which the proxy passed on). C's
// request must go on untouched, and the forged answer be counted.
func TestLaunderedCulpritIsIgnored(t *testing.T) {
	for _, viaTransport := range []bool{false, true} {
		name := "plain proxy transport"
		if viaTransport {
			name = "httpmw transport in the proxy"
		}
		t.Run(name, func(t *testing.T) {
			d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tr := r.Header.Get(tree.Header)
				if tr == "" {
					tr = "1 GET /"
				}
				w.Header().Set(tree.CulpritHeader, tr+";3600000;evil-hop;you are the culprit")
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer d.Close()
			dURL, _ := url.Parse(d.URL)
			ctlS := moirai.New(moirai.WithoutMechanisms())
			defer ctlS.Close()
			proxy := httputil.NewSingleHostReverseProxy(dURL)
			if viaTransport {
				proxy.Transport = httpmw.Transport(nil, httpmw.WithoutLocalShedding(),
					httpmw.WithTreeCancelPeer(ctlS, func(httpmw.Peer) bool { return false }))
			}
			s := httptest.NewServer(httpmw.Handler(ctlS, proxy, httpmw.WithTree("s"), httpmw.WithReexecution()))
			defer s.Close()
			sURL, _ := url.Parse(s.URL)

			ctlC := moirai.New(moirai.WithoutMechanisms())
			defer ctlC.Close()
			client := &http.Client{Transport: httpmw.Transport(nil, httpmw.WithoutLocalShedding(),
				httpmw.WithTreeCancelPeer(ctlC, func(p httpmw.Peer) bool { return p.Host == sURL.Hostname() && p.Port == sURL.Port() }))}
			defer client.CloseIdleConnections()
			var cause error
			var status int
			c := httpmw.Handler(ctlC, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, s.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("C's call to S: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
				cause = context.Cause(r.Context())
				w.WriteHeader(http.StatusOK)
			}), httpmw.WithTree("c"))
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if cause != nil || rec.Code != http.StatusOK {
				t.Fatalf("C's request: cause %v, answer %d; want it untouched", cause, rec.Code)
			}
			if status != http.StatusServiceUnavailable {
				t.Errorf("S answered %d; want D's 503, without its culprit answer", status)
			}
			if n := ctlS.TreeStats().IgnoredCulprits; n < 1 {
				t.Errorf("S counted %d ignored culprit answers; want the forged one", n)
			}
			t.Logf("C: answer %d, cause %v; S answered %d, ignored %d culprit answer(s)", rec.Code, cause, status, ctlS.TreeStats().IgnoredCulprits)
			if st := ctlC.Stats(); st.Cancelled != 0 {
				t.Errorf("C cancelled %d tasks", st.Cancelled)
			}
		})
	}
}

// TestHogPOSTRunsOnce is the hog-POST trial: with WithReexecution on the
// outer handler, as the README integrates it, a client whose POST holds
// the table lock until the controller cancels it gets it executed once,
// whether the handler checks its context (it rolls back and gives up) or
// ignores it (it inserts and answers 201, which is kept); a GET route
// of the same handler still re-executes and completes.
func TestHogPOSTRunsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, method, route string
		checks              bool // the handler checks its context
		wantRuns, wantRows  int32
		wantStatus          int
	}{
		{"POST, context-checking", "POST", "POST /orders", true, 1, 0, http.StatusServiceUnavailable},
		{"POST, context-ignoring", "POST", "POST /orders", false, 1, 1, http.StatusCreated},
		{"GET, context-checking", "GET", "GET /orders", true, 2, 1, http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctl := newCtl(&cancelClass{class: tc.route})
				defer ctl.Close()
				orders := ctl.Mutex("table:orders")
				var runs, rows atomic.Int32
				work := func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					ctx := r.Context()
					if err := orders.Lock(ctx); err != nil {
						http.Error(w, err.Error(), http.StatusServiceUnavailable)
						return
					}
					defer orders.Unlock()
					if runs.Load() == 1 {
						// The client chose a long piece of work: the
						// controller cancels it meanwhile.
						time.Sleep(500 * time.Millisecond)
					}
					if tc.checks && ctx.Err() != nil {
						return // rolled back
					}
					rows.Add(1)
					w.WriteHeader(http.StatusCreated)
				}
				mux := http.NewServeMux()
				mux.HandleFunc("POST /orders", work)
				mux.HandleFunc("GET /orders", work)
				h := httpmw.Handler(ctl, mux, httpmw.WithReexecution(moirai.RetryQuiet(10*time.Millisecond)),
					httpmw.WithObjective(5*time.Second))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/orders", strings.NewReader("order")))
				if rec.Code != tc.wantStatus || runs.Load() != tc.wantRuns || rows.Load() != tc.wantRows {
					t.Errorf("answer %d after %d runs, %d rows; want %d after %d runs, %d rows",
						rec.Code, runs.Load(), rows.Load(), tc.wantStatus, tc.wantRuns, tc.wantRows)
				}
				if st := ctl.Stats(); st.Cancelled != 1 {
					t.Errorf("%d cancellations; want the hog's", st.Cancelled)
				}
				t.Logf("answer %d after %d run(s), %d row(s)", rec.Code, runs.Load(), rows.Load())
			})
		})
	}
}

// TestReexecutionOptIns: a POST is re-executed only when its route says
// it is safe (WithReexecutable) or it carries the idempotency key the
// application honours (WithIdempotencyKey).
func TestReexecutionOptIns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []httpmw.Option
		key      string
		wantRuns int32
	}{
		{"no opt-in", nil, "", 1},
		{"route opts in", []httpmw.Option{httpmw.WithReexecutable("POST /orders")}, "", 2},
		{"another route opts in", []httpmw.Option{httpmw.WithReexecutable("POST /refunds")}, "", 1},
		{"honoured key", []httpmw.Option{httpmw.WithIdempotencyKey("")}, "k-1", 2},
		{"honoured key missing", []httpmw.Option{httpmw.WithIdempotencyKey("")}, "", 1},
		{"key not honoured", nil, "k-1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctl := newCtl(&cancelClass{class: "POST /orders"})
				defer ctl.Close()
				var runs atomic.Int32
				mux := http.NewServeMux()
				mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
					if runs.Add(1) == 1 {
						<-r.Context().Done()
						return
					}
					w.WriteHeader(http.StatusCreated)
				})
				opts := append([]httpmw.Option{httpmw.WithReexecution(moirai.RetryQuiet(10*time.Millisecond), moirai.RetryMaxWait(time.Minute))}, tc.opts...)
				req := httptest.NewRequest("POST", "/orders", nil)
				if tc.key != "" {
					req.Header.Set("Idempotency-Key", tc.key)
				}
				httpmw.Handler(ctl, mux, opts...).ServeHTTP(httptest.NewRecorder(), req)
				if runs.Load() != tc.wantRuns {
					t.Errorf("%d runs; want %d", runs.Load(), tc.wantRuns)
				}
			})
		})
	}
}

// TestTreeWithoutTrustSaysSo: a Handler with WithTree and no trusted peer,
// and a Transport cancelling upward for no downstream, say so in the
// controller's log at once.
func TestTreeWithoutTrustSaysSo(t *testing.T) {
	var log bytes.Buffer
	ctl := moirai.New(moirai.WithoutMechanisms(), moirai.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	defer ctl.Close()
	httpmw.Handler(ctl, http.NotFoundHandler(), httpmw.WithTree("front"))
	httpmw.Transport(nil, httpmw.WithTreeCancelPeer(ctl, nil))
	if out := log.String(); !strings.Contains(out, "without WithTrustedPeer") || !strings.Contains(out, "trusting no downstream") {
		t.Errorf("log: %s", out)
	}
	if !ctl.TreeStats().NoTrustedPeer {
		t.Error("TreeStats: NoTrustedPeer false")
	}
}

// TestTransportSendsOnlyItsOwnHeaders: the moirai headers a request
// carries when it reaches a Transport (a reverse proxy copies its
// caller's) are not sent; the Transport sends its task's own.
func TestTransportSendsOnlyItsOwnHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	client := &http.Client{Transport: httpmw.Transport(nil, httpmw.WithoutLocalShedding())}
	defer client.CloseIdleConnections()
	for _, withTask := range []bool{false, true} {
		ctx := context.Background()
		var tk *moirai.Task
		if withTask {
			ctx, tk = ctl.Begin(ctx, moirai.Spec{Class: "c", Tree: "5 c", Priority: moirai.Priority{Business: 3, User: 9}})
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		forgeAll(req.Header, "77 GET /")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tk.End(nil)
		for k, v := range got {
			if !strings.HasPrefix(k, "Moirai-") {
				continue
			}
			own := withTask && (k == httpmw.HeaderPriority && v[0] == "3/9" || k == tree.Header && v[0] == "5 c")
			if !own || len(v) != 1 {
				t.Errorf("task %v: the request carried %s: %q", withTask, k, v)
			}
		}
		if withTask && got.Get(tree.Header) != "5 c" {
			t.Errorf("the task's tree was not sent: %v", got)
		}
	}
}

// TestReexecutionWaitBoundedByTheObjective: a client waits for its
// request's re-execution at most its route's objective, then gets 503
// with a Retry-After of its class's expected wait.
func TestReexecutionWaitBoundedByTheObjective(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithPolicy(&cancelClass{class: "GET /rebuild"}), moirai.WithDetector(alwaysFiring{}),
			moirai.WithTick(10*time.Millisecond, 10*time.Millisecond), moirai.WithMinCancelInterval(0))
		defer ctl.Close()
		mux := http.NewServeMux()
		mux.HandleFunc("GET /rebuild", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // gives up when cancelled
		})
		h := httpmw.Handler(ctl, mux, httpmw.WithReexecution(), httpmw.WithObjective(300*time.Millisecond))
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/rebuild", nil))
		took := time.Since(start)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("answer %d %v; want 503 with Retry-After", rec.Code, rec.Header())
		}
		if took > 300*time.Millisecond {
			t.Errorf("the client waited %v; want at most its objective, 300ms", took)
		}
		if st := ctl.RetryStats(); st.Dropped != 1 {
			t.Errorf("retry stats %+v; want the re-execution dropped", st)
		}
	})
}

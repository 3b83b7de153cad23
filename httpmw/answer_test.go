package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/tree"
)

// forged is a culprit answer an attacker writes: it names a tree, the
// caller's, and an hour's wait.
func forged(tr string) string { return tr + ";3600000;evil-hop;forged" }

// forge sets moirai headers on h as an attacker would, in both spellings
// (a handler may write the map directly).
func forge(h http.Header, tr string) {
	h.Set(tree.CulpritHeader, forged(tr))
	h["moirai-culprit"] = []string{forged(tr)}
	h.Set(httpmw.HeaderLevel, "9/99")
	h.Set("Moirai-Anything", "x")
}

// TestEveryAnswerPathAppliesTheHeaderRules enumerates the ways a Handler
// answers — the handler's own answer (written, implicit, flushed), a
// kept run's buffer (first run, re-execution), the rejections (admission,
// fence), the 503 of a cancelled request (plain, culprit, dropped), and
// the same through nested Handlers — each with forged moirai headers set
// both before the Handler (on its writer) and by the handler: the answer
// carries only the hop's own (its level with admission, its culprit
// answer to a trusted caller), never a forged one.
func TestEveryAnswerPathAppliesTheHeaderRules(t *testing.T) {
	const callerTree = "77 GET /"
	type path struct {
		name       string
		setup      func(t *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler
		handler    func(w http.ResponseWriter, r *http.Request) // nil: the default (forges, answers 200)
		policy     string                                       // the class the controller cancels once
		method     string
		caller     bool // the request carries callerTree from a trusted caller
		wantStatus int
		wantLevel  bool // the hop's own level
		wantOwn    bool // the hop's own culprit answer, naming callerTree
	}
	answer200 := func(w http.ResponseWriter, r *http.Request) {
		forge(w.Header(), callerTree)
		w.WriteHeader(http.StatusOK)
	}
	// giveUpFirst gives its first run up once cancelled; later runs
	// answer 200; every run forges.
	giveUpFirst := func() func(w http.ResponseWriter, r *http.Request) {
		runs := 0
		return func(w http.ResponseWriter, r *http.Request) {
			forge(w.Header(), callerTree)
			runs++
			if runs == 1 {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(http.StatusOK)
		}
	}
	plain := func(opts ...httpmw.Option) func(*testing.T, *moirai.Controller, http.Handler) http.Handler {
		return func(_ *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, next, opts...)
		}
	}
	trusted := httpmw.WithTrustedPeer(func(*http.Request) bool { return true })
	paths := []path{
		{name: "direct", setup: plain(), wantStatus: 200},
		{name: "direct, implicit 200", setup: plain(), handler: func(w http.ResponseWriter, r *http.Request) {
			forge(w.Header(), callerTree)
		}, wantStatus: 200},
		{name: "direct, flushed", setup: plain(), handler: func(w http.ResponseWriter, r *http.Request) {
			forge(w.Header(), callerTree)
			http.NewResponseController(w).Flush()
		}, wantStatus: 200},
		{name: "direct, tree", setup: plain(httpmw.WithTree("s"), trusted), caller: true, wantStatus: 200},
		{name: "buffered, first run kept", setup: plain(httpmw.WithReexecution()), wantStatus: 200},
		{name: "buffered, re-executed", setup: plain(httpmw.WithReexecution(moirai.RetryQuiet(time.Millisecond), moirai.RetryMaxWait(time.Minute))),
			handler: giveUpFirst(), policy: "GET /", wantStatus: 200},
		{name: "buffered, tree root re-executed", setup: plain(httpmw.WithTree("s"), httpmw.WithReexecution(moirai.RetryQuiet(time.Millisecond), moirai.RetryMaxWait(time.Minute))),
			handler: giveUpFirst(), policy: "GET /", wantStatus: 200},
		{name: "rejected by admission", setup: func(t *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, next, httpmw.WithAdmission(overloaded(t)))
		}, wantStatus: 503, wantLevel: true},
		{name: "admitted", setup: func(t *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, next, httpmw.WithAdmission(admit.NewDAGOR()))
		}, wantStatus: 200, wantLevel: true},
		{name: "rejected by the fence", setup: fullFence, wantStatus: 503},
		{name: "cancelled", setup: plain(), handler: giveUpFirst(), policy: "GET /", wantStatus: 503},
		{name: "cancelled, handler answers 503", setup: plain(), handler: func(w http.ResponseWriter, r *http.Request) {
			forge(w.Header(), callerTree)
			<-r.Context().Done()
			http.Error(w, "gave up", http.StatusServiceUnavailable)
		}, policy: "GET /", wantStatus: 503},
		{name: "cancelled, culprit to a trusted caller", setup: plain(httpmw.WithTree("s"), trusted), handler: giveUpFirst(),
			policy: "GET /", caller: true, wantStatus: 503, wantOwn: true},
		{name: "cancelled, culprit, answered by the handler", setup: plain(httpmw.WithTree("s"), trusted), handler: func(w http.ResponseWriter, r *http.Request) {
			forge(w.Header(), callerTree)
			<-r.Context().Done()
			w.WriteHeader(http.StatusServiceUnavailable)
		}, policy: "GET /", caller: true, wantStatus: 503, wantOwn: true},
		{name: "cancelled, re-execution dropped", setup: plain(httpmw.WithReexecution(moirai.RetryWithin(time.Millisecond))),
			handler: giveUpFirst(), policy: "GET /", wantStatus: 503},
		{name: "nested", setup: func(_ *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, httpmw.Handler(ctl, next), httpmw.WithTree("s"))
		}, wantStatus: 200},
		{name: "nested, inner re-executes", setup: func(_ *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, httpmw.Handler(ctl, next, httpmw.WithReexecution(moirai.RetryQuiet(time.Millisecond), moirai.RetryMaxWait(time.Minute))))
		}, handler: giveUpFirst(), policy: "GET /", wantStatus: 200},
		{name: "nested, cancelled", setup: func(_ *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
			return httpmw.Handler(ctl, httpmw.Handler(ctl, next))
		}, handler: giveUpFirst(), policy: "GET /", wantStatus: 503},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ctl *moirai.Controller
				if p.policy != "" {
					ctl = newCtl(&cancelClass{class: p.policy})
				} else {
					ctl = moirai.New(moirai.WithoutMechanisms())
				}
				defer ctl.Close()
				hf := p.handler
				if hf == nil {
					hf = answer200
				}
				mux := http.NewServeMux()
				mux.HandleFunc("/", hf)
				h := p.setup(t, ctl, mux)
				// Forged headers on the writer before the Handler, too.
				outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					forge(w.Header(), callerTree)
					h.ServeHTTP(w, r)
				})
				method := p.method
				if method == "" {
					method = http.MethodGet
				}
				req := httptest.NewRequest(method, "/", nil)
				if p.caller {
					req.Header.Set(tree.Header, callerTree)
				}
				rec := httptest.NewRecorder()
				outer.ServeHTTP(rec, req)
				res := rec.Result()
				if res.StatusCode != p.wantStatus {
					t.Errorf("status %d; want %d", res.StatusCode, p.wantStatus)
				}
				for k, v := range res.Header {
					switch {
					case k == httpmw.HeaderLevel && p.wantLevel && len(v) == 1 && v[0] != "9/99":
					case k == tree.CulpritHeader && p.wantOwn && len(v) == 1 && strings.HasPrefix(v[0], callerTree+";") && strings.Contains(v[0], ";s;"):
					case strings.HasPrefix(strings.ToLower(k), "moirai-"):
						t.Errorf("answer carries %s: %q", k, v)
					}
				}
				if p.wantLevel && res.Header.Get(httpmw.HeaderLevel) == "" {
					t.Error("answer without the hop's level")
				}
				if p.wantOwn && res.Header.Get(tree.CulpritHeader) == "" {
					t.Error("answer without the hop's culprit answer")
				}
			})
		})
	}
}

// fullFence is a Handler behind a fence whose one permit is held and whose
// line of one is full: a request is rejected.
func fullFence(t *testing.T, ctl *moirai.Controller, next http.Handler) http.Handler {
	f, err := fence.New(1, nil, fence.WithBacklog(1))
	if err != nil {
		t.Fatal(err)
	}
	held, err := f.Acquire(context.Background(), f.Local())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go f.Acquire(ctx, f.Local()) // waits in the line
	synctest.Wait()
	t.Cleanup(func() {
		cancel()
		held.Release()
	})
	return httpmw.Handler(ctl, next, httpmw.WithFence(fence.NewClassifier(f)))
}

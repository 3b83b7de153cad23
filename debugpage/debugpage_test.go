package debugpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/httpmw"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const hostile = `<script>alert("x")</script>&'`

type sec struct{}

func (sec) Title() string     { return "fences " + hostile }
func (sec) Rows() [][2]string { return [][2]string{{"/orders", hostile}} }

func setup(t *testing.T) (*moirai.Controller, func()) {
	ctl := moirai.New()
	mu := ctl.Mutex("table:" + hostile)
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Key: hostile, Class: hostile, Cancellable: true})
	if err := mu.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Cancel(tk.ID(), "reason "+hostile); err != nil {
		t.Fatal(err)
	}
	return ctl, func() { mu.Unlock(); tk.End(nil); ctl.Close() }
}

func get(t *testing.T, h http.Handler, url string) (int, string) {
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", url, nil))
	b, _ := io.ReadAll(rr.Result().Body)
	return rr.Code, string(b)
}

func TestPageEscapesAndHidesKeys(t *testing.T) {
	ctl, done := setup(t)
	defer done()
	code, body := get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{sec{}}}), "/debug/moirai")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if strings.Contains(body, "<script>") {
		t.Fatalf("unescaped user data in page:\n%s", body)
	}
	if !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("escaped user data missing:\n%s", body)
	}
	if !strings.Contains(body, `class="decision"`) || !strings.Contains(body, "manual") {
		t.Fatalf("no decision shown:\n%s", body)
	}
	if !strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("page does not refresh itself")
	}
}

func TestJSONTwin(t *testing.T) {
	ctl, done := setup(t)
	defer done()
	_, body := get(t, debugpage.Handler(ctl, debugpage.Config{}), "/debug/moirai?format=json")
	var v debugpage.View
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decisions) != 1 || v.Decisions[0].Policy != "manual" || v.Decisions[0].Key != "" || v.Decisions[0].Reason != "reason "+hostile {
		t.Fatalf("decisions: %+v", v.Decisions)
	}
	if len(v.Tasks) != 1 || v.Tasks[0].Key != "" || len(v.Tasks[0].Usage) != 1 || v.Tasks[0].Usage[0].Held != 1 {
		t.Fatalf("tasks: %+v", v.Tasks)
	}
	_, body = get(t, debugpage.Handler(ctl, debugpage.Config{ShowKeys: true}), "/?format=json")
	v = debugpage.View{}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Tasks[0].Key != hostile {
		t.Fatalf("ShowKeys: %v %+v", err, v.Tasks)
	}
}

func TestDisabled(t *testing.T) {
	ctl := moirai.New()
	defer ctl.Close()
	if code, _ := get(t, debugpage.Handler(ctl, debugpage.Config{Disabled: true}), "/debug/moirai"); code != 404 {
		t.Fatalf("status %d, want 404", code)
	}
}

func TestFenceSection(t *testing.T) {
	f, err := fence.New(8, []fence.Reservation{{Name: "<d1>", Permits: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	code, body := get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.FenceSection("fence grpc", f, fence.NewTuner(f))}}), "/debug/moirai")
	if code != 200 || !strings.Contains(body, "fence grpc") || !strings.Contains(body, "permits 3") ||
		!strings.Contains(body, "not evaluated yet") || strings.Contains(body, "<d1>") || !strings.Contains(body, "&lt;d1&gt;") {
		t.Errorf("page %d without the escaped fence section:\n%s", code, body)
	}
}

// TestPageShowsRoutePatternsNotPaths: a request served through httpmw
// with its default class shows on the page as its route pattern, never
// as its raw path (user IDs in paths are user data).
func TestPageShowsRoutePatternsNotPaths(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	page := debugpage.Handler(ctl, debugpage.Config{})
	var body string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, body = get(t, page, "/debug/moirai")
	})
	httpmw.Handler(ctl, mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/users/31337", nil))
	if strings.Contains(body, "31337") || !strings.Contains(body, "GET /users/{id}") {
		t.Errorf("the live task's class on the page: want the pattern GET /users/{id}, not the path /users/31337:\n%s", body)
	}
}

// TestPageHidesKeys: a task's key (user data: a client, a tenant) is on
// neither the HTML page nor its JSON twin unless ShowKeys is set.
func TestPageHidesKeys(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	_, tk := ctl.Begin(context.Background(), moirai.Spec{Key: "tenant-7f3a", Class: "GET /orders", Cancellable: true})
	defer tk.End(nil)
	if err := ctl.Cancel(tk.ID(), "by hand"); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"/debug/moirai", "/debug/moirai?format=json"} {
		_, body := get(t, debugpage.Handler(ctl, debugpage.Config{}), url)
		if strings.Contains(body, "tenant-7f3a") {
			t.Errorf("%s shows the key without ShowKeys:\n%s", url, body)
		}
		_, body = get(t, debugpage.Handler(ctl, debugpage.Config{ShowKeys: true}), url)
		if !strings.Contains(body, "tenant-7f3a") {
			t.Errorf("%s hides the key with ShowKeys:\n%s", url, body)
		}
	}
}

type traceKey struct{}

// TestDecisionsLinkToTheirTrace: a decision on a task whose request
// carries a trace id shows it, linked through Config.TraceURL, on the
// page and in its JSON twin; one without shows none.
func TestDecisionsLinkToTheirTrace(t *testing.T) {
	const tid = "0af7651916cd43dd8448eb211c80319c"
	ctl := moirai.New(moirai.WithoutMechanisms(),
		moirai.WithTraceID(func(ctx context.Context) string { s, _ := ctx.Value(traceKey{}).(string); return s }))
	defer ctl.Close()
	_, a := ctl.Begin(context.WithValue(context.Background(), traceKey{}, tid), moirai.Spec{Class: "report", Cancellable: true})
	defer a.End(nil)
	_, b := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
	defer b.End(nil)
	for _, id := range []uint64{a.ID(), b.ID()} {
		if err := ctl.Cancel(id, "operator"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := debugpage.Config{TraceURL: "https://traces.example/trace/{trace_id}?q=" + hostile}
	_, body := get(t, debugpage.Handler(ctl, cfg), "/debug/moirai?format=json")
	var v debugpage.View
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decisions) != 2 {
		t.Fatalf("decisions: %+v", v.Decisions)
	}
	newest, oldest := v.Decisions[0], v.Decisions[1]
	if oldest.Task != a.ID() || oldest.TraceID != tid || oldest.TraceURL != "https://traces.example/trace/"+tid+"?q="+hostile {
		t.Errorf("traced decision: %+v", oldest)
	}
	if newest.Task != b.ID() || newest.TraceID != "" || newest.TraceURL != "" {
		t.Errorf("untraced decision: %+v", newest)
	}
	_, page := get(t, debugpage.Handler(ctl, cfg), "/debug/moirai")
	if !strings.Contains(page, `<a class="trace" href="https://traces.example/trace/`+tid+`?q=%3cscript%3e`) || strings.Contains(page, "<script>") {
		t.Errorf("page lacks the escaped trace link:\n%s", page)
	}
	_, page = get(t, debugpage.Handler(ctl, debugpage.Config{}), "/debug/moirai")
	if !strings.Contains(page, `<span class="trace">trace `+tid+`</span>`) {
		t.Errorf("page without TraceURL lacks the trace id:\n%s", page)
	}
}

// TestPageShowsTreeTrust: a service that enables request trees without a
// trusted peer says so on the page, with the culprit answers it ignored
// (here one a handler passed on from a downstream).
func TestPageShowsTreeTrust(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	page := debugpage.Handler(ctl, debugpage.Config{})
	if _, body := get(t, page, "/debug/moirai"); strings.Contains(body, `id="tree"`) {
		t.Fatalf("a service without trees shows a tree section:\n%s", body)
	}
	h := httpmw.Handler(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Moirai-Culprit", "1 GET;5;evil;forged")
		w.WriteHeader(http.StatusServiceUnavailable)
	}), httpmw.WithTree("front"))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	_, body := get(t, page, "/debug/moirai?format=json")
	var v debugpage.View
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Tree.IgnoredCulprits != 1 || !v.Tree.NoTrustedPeer {
		t.Errorf("tree view %+v; want one ignored culprit answer and no trusted peer", v.Tree)
	}
	if _, body := get(t, page, "/debug/moirai"); !strings.Contains(body, "no trusted peer") {
		t.Errorf("the page does not say no peer is trusted:\n%s", body)
	}
}

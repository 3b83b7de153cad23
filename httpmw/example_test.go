package httpmw_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/task"
)

// The middleware makes every request a task; options say how: its class
// (what the runtime learns durations by), whether the controller may
// cancel it, its priority, admission, and re-execution.
func ExampleOption() {
	ctl := moirai.New()
	defer ctl.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		t := moirai.From(r.Context())
		fmt.Fprintf(w, "class %q cancellable %v", t.Spec().Class, t.Spec().Cancellable)
	})
	h := httpmw.Handler(ctl, mux,
		httpmw.WithClass(func(r *http.Request) string { return "orders" }), // default: the route's pattern, "GET /orders"
		httpmw.WithCancellable(true),
		httpmw.WithPriority(func(*http.Request) moirai.Priority { return moirai.Priority{Business: 1} }),
		httpmw.WithAdmission(admit.NewDAGOR()),
		httpmw.WithReexecution(moirai.RetryWithin(time.Second)))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/orders")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), resp.Header.Get(httpmw.HeaderLevel) != "")
	// Output: 200 class "orders" cancellable true true
}

// The client side: a Transport sends the caller's priority, learns each
// downstream's admission level from its responses and sheds, before
// sending, the requests that level would refuse.
func ExampleTransportOption() {
	client := &http.Client{Transport: httpmw.Transport(http.DefaultTransport,
		httpmw.WithLevelTTL(2*time.Second),
		httpmw.WithPathName(func(r *http.Request) string { return r.URL.Host }))}
	fmt.Println(client.Transport != nil)
	// Output: true
}

// An entry service assigns priorities: the business priority from the
// action, the user priority from the user the service authenticated,
// never from a header the client sets (a refused client would rename
// itself until admitted).
func ExampleWithPriority() {
	ctl := moirai.New()
	defer ctl.Close()
	actions := admit.Actions{"POST /checkout": 0, "GET /search": 10}
	users := admit.NewUserHasher(42, time.Hour)
	passwords := map[string]string{"alice": "secret"} // stands for the service's own authentication
	authenticated := func(r *http.Request) (string, bool) {
		name, pass, ok := r.BasicAuth()
		return name, ok && passwords[name] == pass
	}
	h := httpmw.Handler(ctl, http.NotFoundHandler(),
		httpmw.WithPriority(func(r *http.Request) moirai.Priority {
			p := moirai.Priority{Business: actions.Business(r.Method + " " + r.URL.Path), User: admit.UserLevels - 1}
			if name, ok := authenticated(r); ok {
				p.User = users.User(name, time.Now())
			}
			return p
		}))
	fmt.Println(h != nil)
	// Output: true
}

// Handlers nest: the outer one on the mux makes each request a task, and
// a route's own Handler refines that task with the route's options
// (class, objective, background work, re-execution) instead of beginning
// a second one.
func ExampleHandler_nested() {
	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
	defer ctl.Close()
	show := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sp := moirai.From(r.Context()).Spec()
		fmt.Fprintf(w, "class %q, %v, objective %v", sp.Class, sp.Kind, sp.Objective)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /report", httpmw.Handler(ctl, show,
		httpmw.WithClass(func(*http.Request) string { return "report" }),
		httpmw.WithBackground(),
		httpmw.WithReexecution()))
	mux.Handle("GET /search", httpmw.Handler(ctl, show, httpmw.WithObjective(200*time.Millisecond)))
	mux.Handle("GET /orders", show) // the outer Handler's task, as it began it
	srv := httptest.NewServer(httpmw.Handler(ctl, mux))
	defer srv.Close()
	for _, req := range []struct{ method, path string }{{"POST", "/report"}, {"GET", "/search"}, {"GET", "/orders"}} {
		r, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(body))
	}
	var tot task.Totals
	ctl.Tasks().TotalsInto(&tot)
	fmt.Println(tot.Begun, "tasks for 3 requests")
	// Output:
	// class "report", background, objective 0s
	// class "GET /search", request, objective 200ms
	// class "GET /orders", request, objective 0s
	// 3 tasks for 3 requests
}

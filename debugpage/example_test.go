package debugpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/debugpage"
)

func ExampleHandler() {
	ctl := moirai.New()
	defer ctl.Close()
	mux := http.NewServeMux()
	// Keys stay hidden (ShowKeys false); ?format=json serves the same data.
	mux.Handle("/debug/moirai", debugpage.Handler(ctl, debugpage.Config{}))
	// Serve mux on an internal or loopback address.
}

// kv is a provider's block of key/value rows.
type kv struct{}

func (kv) Title() string     { return "cache" }
func (kv) Rows() [][2]string { return [][2]string{{"entries", "1024"}, {"hit rate", "0.93"}} }

// A Section adds a provider's rows to the page and to its JSON twin;
// FenceSection is the path fences' one.
func ExampleSection() {
	ctl := moirai.New()
	defer ctl.Close()
	v := debugpage.Collect(ctl, debugpage.Config{Sections: []debugpage.Section{kv{}}})
	fmt.Println(v.Sections["cache"])
	// Output: [[entries 1024] [hit rate 0.93]]
}

// Config turns the page off, shows task keys (user data: off by default)
// and sets how often the page refreshes itself.
func ExampleConfig() {
	h := debugpage.Handler(nil, debugpage.Config{Disabled: true})
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/debug/moirai", nil))
	fmt.Println(rr.Code)
	// Output: 404
}

// View is what the page shows, and its JSON form (?format=json).
func ExampleView() {
	ctl := moirai.New()
	defer ctl.Close()
	_, t := ctl.Begin(context.Background(), moirai.Spec{Class: "GET /orders", Key: "customer-7"})
	defer t.End(nil)
	v := debugpage.Collect(ctl, debugpage.Config{})
	fmt.Println(len(v.Tasks), v.Tasks[0].Class, v.Tasks[0].Key == "")
	// Output: 1 GET /orders true
}

// The views are the page's rows: tasks with their holds and waits,
// resources, decisions with their reasons.
func ExampleTaskView() {
	ctl := moirai.New()
	defer ctl.Close()
	mu := ctl.Mutex("table:orders")
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "UPDATE orders"})
	defer t.End(nil)
	_ = mu.Lock(ctx)
	defer mu.Unlock()
	v := debugpage.Collect(ctl, debugpage.Config{})
	var tv debugpage.TaskView = v.Tasks[0]
	var uv debugpage.UsageView = tv.Usage[0]
	var rv debugpage.ResourceView = v.Resources[0]
	fmt.Println(tv.Class, uv.Resource, uv.Held, rv.Name, rv.Held)
	// Output: UPDATE orders table:orders 1 table:orders 1
}

// A DecisionView is one decision with its reason and details.
func ExampleDecisionView() {
	ctl := moirai.New()
	defer ctl.Close()
	_, t := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
	_ = ctl.Cancel(t.ID(), "by hand")
	t.End(nil)
	var d debugpage.DecisionView = debugpage.Collect(ctl, debugpage.Config{}).Decisions[0]
	fmt.Println(d.Policy, d.Action, d.Reason)
	// Output: manual cancel by hand
}

// A ResourceView is one resource's line: holders, waiters, the wait in the
// last window.
func ExampleResourceView() {
	ctl := moirai.New()
	defer ctl.Close()
	ctl.Semaphore("connections", 10)
	var r debugpage.ResourceView = debugpage.Collect(ctl, debugpage.Config{}).Resources[0]
	fmt.Println(r.Name, r.Capacity, r.Waiters)
	// Output: connections 10 0
}

// A UsageView is one task's hold of, or wait for, one resource.
func ExampleUsageView() {
	u := debugpage.UsageView{Resource: "table:orders", Held: 1, Hold: "1.2s"}
	fmt.Println(u.Resource, u.Held, u.Hold)
	// Output: table:orders 1 1.2s
}

// AdmissionSection shows a DAGOR admitter's level, state and refusals.
func ExampleAdmissionSection() {
	ctl := moirai.New()
	defer ctl.Close()
	d := admit.NewDAGOR()
	v := debugpage.Collect(ctl, debugpage.Config{Sections: []debugpage.Section{debugpage.AdmissionSection("admission", d)}})
	for _, row := range v.Sections["admission"] {
		fmt.Println(row[0]+":", row[1])
	}
	// Output:
	// level: 63/127: admits everyone
	// state: calm
	// refused: none
}

// CPUSection shows the CPU budget and its derivation (read from the
// machine here, so nothing is printed), and a pool's state.
func ExampleCPUSection() {
	ctl := moirai.New()
	defer ctl.Close()
	b := cpu.ReadBudget(os.DirFS("/"))
	mux := http.NewServeMux()
	mux.Handle("/debug/moirai", debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{debugpage.CPUSection("cpu", b, nil)}}))
}

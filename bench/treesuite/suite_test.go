package treesuite

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// account: a hold counts from the first decision on its tree, in any
// service, and trees never decided count nothing.
func TestAccount(t *testing.T) {
	ms := int64(time.Millisecond)
	m := measured{culprits: 2, arrived: map[string]int64{"1": 0, "2": 0}}
	m.account([]Stats{
		{Holds: []Hold{{"1", 0, 100 * ms}, {"2", 0, 900 * ms}}, Retries: 2},
		{Holds: []Hold{{"1", 10 * ms, 50 * ms}}, Decided: map[string]int64{"1": 40 * ms}, Victims: 1, Culprits: 1},
		{Holds: []Hold{{"1", 60 * ms, 70 * ms}}, Decided: map[string]int64{"1": 45 * ms}},
	})
	// Tree 1: 60 ms (front) + 10 ms (b1 after 40) + 10 ms (b2) = 80 ms;
	// tree 2 was never decided. Mean over the 2 culprit trees: 40 ms.
	if math.Abs(m.holdAfter-40) > 1e-9 || m.retries != 2 || m.victims != 1 || m.cancelledC != 1 || m.decided != 1 || math.Abs(m.decidedMs-40) > 1e-9 {
		t.Fatalf("%+v", m)
	}
}

func TestBadInput(t *testing.T) {
	good := ServerConfig{Role: RoleB1, Controller: "tree", SLO: time.Millisecond, LightWork: time.Millisecond, CulpritWork: time.Millisecond}
	for _, mod := range []func(*ServerConfig){
		func(c *ServerConfig) { c.Role = "x" },
		func(c *ServerConfig) { c.Controller = "nope" },
		func(c *ServerConfig) { c.SLO = 0 },
		func(c *ServerConfig) { c.Role = RoleFront },
		func(c *ServerConfig) { c.Retries = -1 },
	} {
		cfg := good
		mod(&cfg)
		if err := Serve(t.Context(), cfg, func(string) { t.Fatal("ready with a bad config") }); err == nil {
			t.Errorf("Serve(%+v): no error", cfg)
		}
	}
	if _, err := Execute(t.Context(), Options{Duration: time.Millisecond}); err == nil {
		t.Error("Execute with a 1 ms duration: no error")
	}
}

// TestRunTree runs the suite's three services in this process, briefly,
// under the tree controller: a culprit tree is decided on, and held
// nothing long after; nothing retried into b1.
func TestRunTree(t *testing.T) {
	if os.Getenv("MOIRAI_TREE_RUN") != "1" {
		t.Skip("runs three services and a real controller for a few seconds; set MOIRAI_TREE_RUN=1")
	}
	o := Options{Controllers: []Controller{controllers[2]}, Warmup: 200 * time.Millisecond, Duration: 1500 * time.Millisecond, Seed: 1,
		Rate: 50, CulpritWork: 2 * time.Second,
		Start: func(ctx context.Context, cfg ServerConfig) (string, func() error, error) {
			ctx, cancel := context.WithCancel(ctx)
			addr := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, cfg, func(a string) { addr <- a }) }()
			select {
			case a := <-addr:
				return a, func() error { cancel(); return <-done }, nil
			case err := <-done:
				cancel()
				return "", nil, err
			}
		}}
	res, err := Execute(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Rows[1].Error != "" {
		t.Fatalf("rows %+v", res.Rows)
	}
	r := res.Rows[1]
	if r.CulpritsCancelled == 0 || r.RetriesIntoOverload != 0 || r.VictimsCancelled != 0 || r.CulpritHoldAfterMs >= 1000 {
		t.Fatalf("tree row %+v: want a culprit cancelled, no retry, no victim, and its hold cut well before its 2 s of work", r)
	}
}

// pool: two rounds pooled are one run of both: the light latencies
// together (the p99 over all of them), the holds after the decision and
// the decision times averaged over every culprit tree, the counts summed.
func TestPool(t *testing.T) {
	ms := int64(time.Millisecond)
	runOf := func(lights []time.Duration, holdEnd int64, retries int64) measured {
		m := measured{light: lights, seconds: 1, culprits: 1, inSLO: len(lights), arrived: map[string]int64{"1": 0}}
		m.account([]Stats{{Holds: []Hold{{"1", 0, holdEnd}}, Decided: map[string]int64{"1": 10 * ms}, Retries: retries, Culprits: 1}})
		return m
	}
	var lights []time.Duration
	for i := range 200 {
		lights = append(lights, time.Duration(i+1)*time.Millisecond)
	}
	a := runOf(lights[:100], 30*ms, 1)  // 20 ms held after its decision at 10 ms
	b := runOf(lights[100:], 110*ms, 0) // 100 ms
	var p measured
	p.pool(a)
	p.pool(b)
	if got := p.p99(); got != 198*time.Millisecond {
		t.Errorf("pooled p99 %v; want 198ms, the 198th of 200", got)
	}
	if math.Abs(p.holdAfter-60) > 1e-9 || math.Abs(p.decidedMs-10) > 1e-9 || p.culprits != 2 || p.retries != 1 || p.cancelledC != 2 || p.seconds != 2 || p.inSLO != 200 {
		t.Fatalf("pooled %+v; want a mean hold after of 60 ms, decisions at 10 ms, 2 culprits, 1 retry, 2 s", p)
	}
	r := p.row("tree", p)
	if r.P99Norm != 1 || r.ThroughputNorm != 1 || r.CulpritHoldAfterMs != 60 {
		t.Fatalf("row %+v", r)
	}
}

package fence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/fence"
)

func TestClassifierLearnsTheSlowestDownstream(t *testing.T) {
	f := mustNew(t, 16, []fence.Reservation{{"d1", 4}, {"d2", 4}})
	c := fence.NewClassifier(f)
	if got := c.PathOf("/svc/Get"); got != f.Local() {
		t.Fatalf("unseen kind: %q, want local", got.Name())
	}
	ctx := fence.WithCaller(context.Background(), c, "/svc/Get")
	fence.ObserveCall(ctx, "d2", 2*time.Millisecond)
	if got := c.PathOf("/svc/Get").Name(); got != "d2" {
		t.Fatalf("after one d2 call: %q, want d2", got)
	}
	// The same handler also calls d1, which takes longer: d1's path.
	fence.ObserveCall(ctx, "d1", 20*time.Millisecond)
	fence.ObserveCall(ctx, "d2", 2*time.Millisecond)
	if got := c.PathOf("/svc/Get").Name(); got != "d1" {
		t.Fatalf("after d1 took more time: %q, want d1", got)
	}
	// A context without a caller and a zero path change nothing.
	fence.ObserveCall(context.Background(), "d2", time.Hour)
	fence.ObserveCall(ctx, "", time.Hour)
	fence.ObserveCall(ctx, "d2", -time.Hour)
	if d := cmp.Diff(map[string]string{"/svc/Get": "d1"}, c.Routes()); d != "" {
		t.Errorf("Routes (-want +got):\n%s", d)
	}
	// The kind's calls move to d2 for good: decay lets it follow.
	for range 200 {
		fence.ObserveCall(ctx, "d2", time.Second)
	}
	if got := c.PathOf("/svc/Get").Name(); got != "d2" {
		t.Errorf("after a long run of d2 calls: %q, want d2", got)
	}
	// A downstream the fence does not know: the fallback, counted.
	other := fence.WithCaller(context.Background(), c, "/svc/Other")
	fence.ObserveCall(other, "d9", time.Millisecond)
	if got := c.PathOf("/svc/Other"); got != f.Local() || f.Stats().Unknown == 0 {
		t.Errorf("unknown downstream: %q (unknown %d), want the local fallback, counted", got.Name(), f.Stats().Unknown)
	}
	if c.Fence() != f {
		t.Error("Fence() is not the classifier's fence")
	}
}

// TestClassifierBoundsItsKinds: kinds come from requests, so a flood of
// distinct ones (a raw path per request) must not grow the classifier
// without bound; a kind past the cap stays local, and is counted.
func TestClassifierBoundsItsKinds(t *testing.T) {
	f := mustNew(t, 16, []fence.Reservation{{"d1", 4}})
	c := fence.NewClassifier(f)
	c.Observe("GET /known", "d1", time.Millisecond)
	for i := range 50_000 {
		c.Observe(fmt.Sprintf("GET /users/%d", i), "d1", time.Millisecond)
	}
	if n := len(c.Routes()); n != fence.MaxKinds {
		t.Fatalf("%d kinds learned from 50,001 distinct ones, want the cap, %d", n, fence.MaxKinds)
	}
	if got, want := c.Dropped(), int64(50_001-fence.MaxKinds); got != want {
		t.Errorf("Dropped() = %d, want %d (the calls of kinds past the cap)", got, want)
	}
	if got := c.PathOf("GET /known").Name(); got != "d1" {
		t.Errorf("a kind learned before the flood: %q, want d1", got)
	}
	if got := c.PathOf("GET /users/49999"); got != f.Local() {
		t.Errorf("a kind past the cap: %q, want local", got.Name())
	}
}

// TestClassifierDownstreamsBoundedByPaths: downstream names can come from
// requests too (a proxy's target host); a kind's record counts them per
// fence path, so a flood of unknown names all land on the fallback.
func TestClassifierDownstreamsBoundedByPaths(t *testing.T) {
	f := mustNew(t, 16, []fence.Reservation{{"d1", 4}})
	c := fence.NewClassifier(f)
	c.Observe("GET /proxy", "d1", 50*time.Millisecond)
	for i := range 10_000 {
		c.Observe("GET /proxy", fmt.Sprintf("host%d:80", i), time.Millisecond)
	}
	// 10,000 unknown names are one fallback (local) path: 10 s in all
	// against d1's 50 ms, so the kind moves to the fallback.
	if got := c.PathOf("GET /proxy"); got != f.Local() {
		t.Errorf("after 10,000 unknown downstreams: %q, want the local fallback", got.Name())
	}
}

package taskx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
)

// classResolver gives the class "route" and counts its runs.
type classResolver struct{ runs atomic.Int32 }

func (c *classResolver) Resolve(base *Spec, own bool) *Spec {
	c.runs.Add(1)
	sp := *base
	sp.Class = "route"
	return &sp
}

// TestPendingClass: a task begun pending reads its provisional class
// nowhere: its Resolver runs once, on the first read (from any number of
// goroutines at once: the others wait for it), whoever reads; a task
// nothing read ends without running it, unless it ends penalized, when
// the penalty it leaves goes to its class.
func TestPendingClass(t *testing.T) {
	r := newRegistry(clock.New(), Options{})
	for _, read := range []string{"FromContext", "Spec", "flagged acquisition", "none", "penalized"} {
		var res classResolver
		p := &Pending{R: &res}
		ctx, tk, _ := BeginWith[struct{}](r, context.Background(), Spec{Class: "GET"}, p)
		switch read {
		case "FromContext":
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if c := Settled(FromContext(ctx)).Spec().Class; c != "route" {
						t.Errorf("%s: class %q, want route", read, c)
					}
				})
			}
			wg.Wait()
		case "Spec":
			if c := tk.Spec().Class; c != "route" {
				t.Errorf("%s: class %q, want route", read, c)
			}
		case "flagged acquisition":
			if !Flagged(tk) {
				t.Errorf("a pending task is not flagged: a primitive's first acquisition would not learn its class")
			}
			Settled(tk)
			if Flagged(tk) {
				t.Errorf("a task whose class is known is still flagged")
			}
		case "penalized":
			tk.penalize(time.Millisecond)
		}
		tk.End(nil)
		want := int32(1)
		if read == "none" {
			want = 0
		}
		if n := res.runs.Load(); n != want {
			t.Errorf("%s: the Resolver ran %d times, want %d", read, n, want)
		}
		if tk.pend.Load() == p {
			t.Errorf("%s: the ended task still holds its Pending", read)
		}
		if read == "penalized" && r.carriedFor("route") != 1 {
			t.Errorf("the penalty of a pending task that ended penalized was not left to its class (route: %d carried)", r.carriedFor("route"))
		}
	}
}

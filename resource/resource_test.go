package resource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func TestRegister(t *testing.T) {
	tests := []struct {
		name     string
		resName  string
		kind     resource.Kind
		capacity int64
		wantErr  error // nil: any error when wantFail
		wantFail bool
	}{
		{name: "lock", resName: "l", kind: resource.KindLock},
		{name: "queue with capacity", resName: "q", kind: resource.KindQueue, capacity: 8},
		{name: "io", resName: "disk", kind: resource.KindIO},
		{name: "duplicate", resName: "existing", kind: resource.KindCPU, wantErr: resource.ErrExists, wantFail: true},
		{name: "duplicate of another kind", resName: "existing", kind: resource.KindLock, wantErr: resource.ErrExists, wantFail: true},
		{name: "kind zero", resName: "k0", kind: 0, wantFail: true},
		{name: "kind past the last", resName: "k6", kind: resource.KindIO + 1, wantFail: true},
		{name: "empty name", resName: "", kind: resource.KindLock, wantFail: true},
		{name: "negative capacity", resName: "neg", kind: resource.KindMemory, capacity: -1, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := resource.NewRegistry()
			if _, err := g.Register("existing", resource.KindCPU, 0); err != nil {
				t.Fatal(err)
			}
			r, err := g.Register(tt.resName, tt.kind, tt.capacity)
			if tt.wantFail {
				if err == nil {
					t.Fatalf("Register(%q, %v, %d) succeeded", tt.resName, tt.kind, tt.capacity)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("Register = %v, want %v", err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "resource") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				if r != nil {
					t.Errorf("Register returned %v with an error", r)
				}
				if got := g.Len(); got != 1 {
					t.Errorf("Len() after a failed Register = %d, want 1", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			got := [...]any{r.Name(), r.Kind(), r.Capacity(), g.Len()}
			want := [...]any{tt.resName, tt.kind, tt.capacity, 2}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Name, Kind, Capacity, Len (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegistryLookup(t *testing.T) {
	g := resource.NewRegistry()
	names := []string{"a", "b", "c"}
	var regd []*resource.Resource
	for _, n := range names {
		r, err := g.Register(n, resource.KindLock, 0)
		if err != nil {
			t.Fatal(err)
		}
		regd = append(regd, r)
	}
	for i, n := range names {
		r, err := g.Lookup(n)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", n, err)
		}
		if r != regd[i] {
			t.Errorf("Lookup(%q) = %p, want %p", n, r, regd[i])
		}
		if got := g.ByID(r.ID()); got != r {
			t.Errorf("ByID(%d) = %p, want %p", r.ID(), got, r)
		}
		if r.ID() == 0 {
			t.Errorf("%q has ID 0", n)
		}
	}
	_, err := g.Lookup("nope")
	if !errors.Is(err, resource.ErrUnknown) {
		t.Fatalf("Lookup of an unknown name = %v, want %v", err, resource.ErrUnknown)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list the known name %q", err, n)
		}
	}
	for _, id := range []task.ResourceID{0, task.ResourceID(len(names) + 1), 1 << 30} {
		if got := g.ByID(id); got != nil {
			t.Errorf("ByID(%d) = %v, want nil", id, got)
		}
	}
	var all []string
	for i, r := range g.All() {
		if r != regd[i] {
			t.Errorf("All()[%d] = %p, want %p", i, r, regd[i])
		}
		all = append(all, r.Name())
	}
	if diff := cmp.Diff(names, all); diff != "" {
		t.Errorf("names of All() (-want +got):\n%s", diff)
	}
	if got := resource.NewRegistry().All(); len(got) != 0 {
		t.Errorf("All() of an empty registry = %v", got)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	g := resource.NewRegistry()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				name := fmt.Sprintf("r%d-%d", i, j)
				r, err := g.Register(name, resource.KindQueue, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if got := g.ByID(r.ID()); got != r {
					t.Errorf("ByID(%d) = %v, want %q", r.ID(), got, name)
				}
				if _, err := g.Lookup(name); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := g.Len(); got != 200 {
		t.Errorf("Len() = %d, want 200", got)
	}
	for i, r := range g.All() {
		if int(r.ID()) != i+1 {
			t.Errorf("All()[%d] has ID %d", i, r.ID())
		}
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		kind resource.Kind
		want string
	}{
		{resource.KindLock, "lock"},
		{resource.KindQueue, "queue"},
		{resource.KindMemory, "memory"},
		{resource.KindCPU, "cpu"},
		{resource.KindIO, "io"},
		{0, "kind(0)"},
		{resource.KindIO + 1, "kind(6)"},
		{255, "kind(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			got, err := resource.ParseKind(tt.want)
			valid := tt.kind >= resource.KindLock && tt.kind <= resource.KindIO
			if (err == nil) != valid {
				t.Fatalf("ParseKind(%q) = %v, %v; want success %v", tt.want, got, err, valid)
			}
			if valid && got != tt.kind {
				t.Errorf("ParseKind(%q) = %v, want %v", tt.want, got, tt.kind)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in      string
		want    resource.Kind
		wantErr bool
	}{
		{in: "lock", want: resource.KindLock},
		{in: "LOCK", want: resource.KindLock},
		{in: " Queue\t", want: resource.KindQueue},
		{in: "memory", want: resource.KindMemory},
		{in: "Cpu", want: resource.KindCPU},
		{in: "io\n", want: resource.KindIO},
		{in: "", wantErr: true},
		{in: "locks", wantErr: true},
		{in: "kind(1)", wantErr: true},
		{in: "1", wantErr: true},
		{in: "l o c k", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := resource.ParseKind(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseKind(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseKind(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"lock", "queue", "memory", "cpu", "io", " IO ", "Lock\n", "", "kind(3)", "lockx", "\u212aind", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<10 {
			t.Skip("longer than any kind name")
		}
		k, err := resource.ParseKind(s)
		if err != nil {
			if k != 0 {
				t.Errorf("ParseKind(%q) = %v with error %v, want 0", s, k, err)
			}
			if !strings.HasPrefix(err.Error(), "resource: ") {
				t.Errorf("ParseKind(%q) error %q lacks the package prefix", s, err)
			}
			return
		}
		if k < resource.KindLock || k > resource.KindIO {
			t.Fatalf("ParseKind(%q) = invalid kind %d", s, uint8(k))
		}
		// What parses is a kind's name, up to case and surrounding space,
		// and the name parses back to the kind.
		if !strings.EqualFold(k.String(), strings.TrimSpace(s)) {
			t.Errorf("ParseKind(%q) = %v", s, k)
		}
		if k2, err := resource.ParseKind(k.String()); err != nil || k2 != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), k2, err, k)
		}
	})
}

// TestRawEvents drives a resource through the raw event vocabulary.
func TestRawEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		r := e.register(t, "custom", resource.KindIO, 0)
		ctx, tk := e.begin(t, task.Spec{})
		r.WaitBegin(ctx)
		time.Sleep(2 * time.Millisecond)
		e.clk.Advance()
		r.WaitEnd(ctx)
		if err := r.Acquire(ctx, 3); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		e.clk.Advance()
		if err := r.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r.Evicted(ctx, 4)
		want := task.Usage{Resource: r.ID(), Held: 2, Hold: 5 * time.Millisecond, Waits: 1, Wait: 2 * time.Millisecond, Evictions: 4}
		if diff := cmp.Diff(want, usage(t, tk, r)); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
		if err := r.Release(ctx, 3); !errors.Is(err, task.ErrOverRelease) {
			t.Errorf("Release(3) of 2 = %v, want an error wrapping %v", err, task.ErrOverRelease)
		}
		if err := r.Acquire(ctx, task.MaxUnits); !errors.Is(err, task.ErrTooManyUnits) {
			t.Errorf("Acquire(MaxUnits) on top of 2 = %v, want an error wrapping %v", err, task.ErrTooManyUnits)
		}
		if got := r.Misuse(); got != 2 {
			t.Errorf("Misuse() = %d, want 2", got)
		}
		if diff := cmp.Diff(want, usage(t, tk, r)); diff != "" {
			t.Errorf("usage after refused events (-want +got):\n%s", diff)
		}
		// Untracked events are counted and otherwise ignored.
		bg := context.Background()
		r.WaitBegin(bg)
		r.WaitEnd(bg)
		if err := r.Acquire(bg, 1); err != nil {
			t.Error(err)
		}
		if err := r.Release(bg, 5); err != nil {
			t.Error(err)
		}
		r.Evicted(bg, 1)
		if got := r.Untracked(); got != 5 {
			t.Errorf("Untracked() = %d, want 5", got)
		}
		if got := r.Misuse(); got != 2 {
			t.Errorf("Misuse() after untracked events = %d, want 2", got)
		}
		var nilCtx context.Context
		if got := mustPanic(t, func() { r.WaitBegin(nilCtx) }); got != "moirai: nil Context" {
			t.Errorf("panic on a nil ctx = %v", got)
		}
	})
}

func TestFold(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		g := resource.NewRegistry()
		lock, _ := g.Register("lock", resource.KindLock, 0)
		pool, _ := g.Register("pool", resource.KindMemory, 0)
		g.Fold(nil, 0, []task.Usage{
			{Resource: lock.ID(), Wait: 5 * time.Millisecond, Hold: 7 * time.Millisecond, Waits: 2},
			{Resource: pool.ID(), Evictions: 3},
			{Resource: 99, Waits: 1}, // unknown: ignored
		})
		g.Fold(nil, 0, []task.Usage{{Resource: lock.ID(), Wait: time.Millisecond, Waits: 1}})
		got := map[string]resource.Totals{"lock": lock.EndedTotals(), "pool": pool.EndedTotals()}
		want := map[string]resource.Totals{
			"lock": {Wait: 6 * time.Millisecond, Hold: 7 * time.Millisecond, Waits: 3},
			"pool": {Evictions: 3},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("EndedTotals (-want +got):\n%s", diff)
		}
	})
	t.Run("on end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			m := e.mutex(t, "m")
			if got := m.Resource().EndedTotals(); got != (resource.Totals{}) {
				t.Fatalf("EndedTotals() before any task = %+v", got)
			}
			actx, a := e.begin(t, task.Spec{})
			bctx, b := e.begin(t, task.Spec{})
			if err := m.Lock(actx); err != nil {
				t.Fatal(err)
			}
			done := goErr(func() error { return m.Lock(bctx) })
			synctest.Wait()
			time.Sleep(3 * time.Millisecond)
			e.clk.Advance()
			m.Unlock()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			e.clk.Advance()
			m.Unlock()
			a.End(nil)
			want := resource.Totals{Hold: 3 * time.Millisecond}
			if diff := cmp.Diff(want, m.Resource().EndedTotals()); diff != "" {
				t.Errorf("after the first task ended (-want +got):\n%s", diff)
			}
			b.End(nil)
			want = resource.Totals{Hold: 4 * time.Millisecond, Wait: 3 * time.Millisecond, Waits: 1}
			if diff := cmp.Diff(want, m.Resource().EndedTotals()); diff != "" {
				t.Errorf("after both ended (-want +got):\n%s", diff)
			}
		})
	})
}

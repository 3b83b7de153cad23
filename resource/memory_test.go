package resource_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func TestMemory(t *testing.T) {
	// op is one call on the pool by the test's task.
	type op struct {
		name string // use, free, evict, miss (MissBegin, 3ms, MissEnd), sleep
		n    int64
	}
	tests := []struct {
		name      string
		ops       []op
		wantErr   []bool // per op
		wantUsage task.Usage
		wantInUse int64
	}{
		{
			name:      "use and free",
			ops:       []op{{"use", 10}, {"sleep", 0}, {"free", 4}},
			wantErr:   []bool{false, false, false},
			wantUsage: task.Usage{Held: 6, Hold: time.Millisecond},
			wantInUse: 6,
		},
		{
			name:      "free all",
			ops:       []op{{"use", 10}, {"sleep", 0}, {"free", 10}, {"sleep", 0}},
			wantErr:   []bool{false, false, false, false},
			wantUsage: task.Usage{Hold: time.Millisecond},
		},
		{
			name:      "free more than used",
			ops:       []op{{"use", 3}, {"free", 4}},
			wantErr:   []bool{false, true},
			wantUsage: task.Usage{Held: 3},
			wantInUse: 3,
		},
		{
			name:      "free without use",
			ops:       []op{{"free", 1}},
			wantErr:   []bool{true},
			wantUsage: task.Usage{},
		},
		{
			name:      "use too many units",
			ops:       []op{{"use", task.MaxUnits}, {"use", 1}},
			wantErr:   []bool{false, true},
			wantUsage: task.Usage{Held: task.MaxUnits},
			wantInUse: task.MaxUnits,
		},
		{
			name:      "non-positive amounts do nothing",
			ops:       []op{{"use", 2}, {"use", 0}, {"use", -5}, {"free", 0}, {"free", -1}},
			wantErr:   []bool{false, false, false, false, false},
			wantUsage: task.Usage{Held: 2},
			wantInUse: 2,
		},
		{
			name:      "evictions",
			ops:       []op{{"evict", 3}, {"evict", 2}, {"evict", 0}},
			wantErr:   []bool{false, false, false},
			wantUsage: task.Usage{Evictions: 5},
		},
		{
			name:      "misses are waits",
			ops:       []op{{"miss", 0}, {"miss", 0}},
			wantErr:   []bool{false, false},
			wantUsage: task.Usage{Waits: 2, Wait: 6 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				m := resource.NewMemory(e.register(t, "pool", resource.KindMemory, 0))
				ctx, tk := e.begin(t, task.Spec{})
				var gotErr []bool
				for _, o := range tt.ops {
					var err error
					switch o.name {
					case "use":
						err = m.Use(ctx, o.n)
					case "free":
						err = m.Free(ctx, o.n)
					case "evict":
						m.Evict(ctx, o.n)
					case "miss":
						m.MissBegin(ctx)
						time.Sleep(3 * time.Millisecond)
						e.clk.Advance()
						m.MissEnd(ctx)
					case "sleep":
						time.Sleep(time.Millisecond)
						e.clk.Advance()
					default:
						t.Fatalf("unknown op %q", o.name)
					}
					gotErr = append(gotErr, err != nil)
				}
				if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				want := tt.wantUsage
				want.Resource = m.Resource().ID()
				if diff := cmp.Diff(want, usage(t, tk, m.Resource())); diff != "" {
					t.Errorf("usage (-want +got):\n%s", diff)
				}
				if got := m.InUse(); got != tt.wantInUse {
					t.Errorf("InUse() = %d, want %d", got, tt.wantInUse)
				}
				if got := m.Resource().Resident(); got != tt.wantInUse {
					t.Errorf("Resident() = %d, want %d", got, tt.wantInUse)
				}
			})
		})
	}
}

func TestMemoryFreeTooMuch(t *testing.T) {
	e := newEnv(t)
	m := resource.NewMemory(e.register(t, "pool", resource.KindMemory, 100))
	ctx, _ := e.begin(t, task.Spec{})
	if err := m.Use(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(ctx, 6); !errors.Is(err, task.ErrOverRelease) {
		t.Errorf("Free(6) of 5 = %v, want an error wrapping %v", err, task.ErrOverRelease)
	}
	if got := m.Resource().Misuse(); got != 1 {
		t.Errorf("Misuse() = %d, want 1", got)
	}
	if got := m.InUse(); got != 5 {
		t.Errorf("InUse() = %d, want 5", got)
	}
}

// TestMemoryEnd checks that what an ended task still used leaves the pool
// and its evictions go to the resource's totals.
func TestMemoryEnd(t *testing.T) {
	e := newEnv(t)
	m := resource.NewMemory(e.register(t, "pool", resource.KindMemory, 100))
	actx, a := e.begin(t, task.Spec{})
	bctx, _ := e.begin(t, task.Spec{})
	for _, step := range []struct {
		ctx context.Context
		n   int64
	}{{actx, 7}, {bctx, 4}} {
		if err := m.Use(step.ctx, step.n); err != nil {
			t.Fatal(err)
		}
	}
	m.Evict(actx, 2)
	a.End(nil)
	if got := m.InUse(); got != 4 {
		t.Errorf("InUse() after the end of the task using 7 of 11 = %d, want 4", got)
	}
	if got := m.Resource().EndedTotals().Evictions; got != 2 {
		t.Errorf("EndedTotals().Evictions = %d, want 2", got)
	}
}

func TestMemoryUntracked(t *testing.T) {
	e := newEnv(t)
	m := resource.NewMemory(e.register(t, "pool", resource.KindMemory, 0))
	bg := context.Background()
	if err := m.Use(bg, 3); err != nil {
		t.Fatal(err)
	}
	m.Evict(bg, 1)
	m.MissBegin(bg)
	m.MissEnd(bg)
	if err := m.Free(bg, 2); err != nil {
		t.Fatal(err)
	}
	if got := m.InUse(); got != 1 {
		t.Errorf("InUse() = %d, want 1", got)
	}
	if got := m.Resource().Untracked(); got == 0 {
		t.Error("Untracked() = 0 after untracked events")
	}
}

package taskx_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/task"
)

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		spec    task.Spec
		wantErr bool
		want    task.Spec // the spec Begin keeps
	}{
		{name: "zero", spec: task.Spec{}, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "goal kept", spec: task.Spec{Goal: 2}, want: task.Spec{Goal: 2}},
		{name: "tiny goal kept", spec: task.Spec{Goal: 1e-300}, want: task.Spec{Goal: 1e-300}},
		{name: "largest goal kept", spec: task.Spec{Goal: math.MaxFloat64}, want: task.Spec{Goal: math.MaxFloat64}},
		{name: "negative zero goal", spec: task.Spec{Goal: math.Copysign(0, -1)}, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "negative goal", spec: task.Spec{Goal: -1}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "NaN goal", spec: task.Spec{Goal: math.NaN()}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "+Inf goal", spec: task.Spec{Goal: math.Inf(1)}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "-Inf goal", spec: task.Spec{Goal: math.Inf(-1)}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "unknown kind", spec: task.Spec{Kind: task.Background + 1, Goal: 0.7}, wantErr: true, want: task.Spec{Kind: task.Request, Goal: 0.7}},
		{name: "max deferral kept", spec: task.Spec{MaxDeferral: 2}, want: task.Spec{Goal: 2}},
		{name: "max deferral before goal", spec: task.Spec{MaxDeferral: 0.3, Goal: 2}, want: task.Spec{Goal: 0.3}},
		{name: "negative max deferral", spec: task.Spec{MaxDeferral: -1, Goal: 2}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{name: "own objective", spec: task.Spec{Objective: time.Second}, want: task.Spec{Objective: time.Second, Goal: task.DefaultGoal}},
		{name: "no objective", spec: task.Spec{Objective: task.NoObjective}, want: task.Spec{Objective: task.NoObjective, Goal: task.DefaultGoal}},
		{name: "negative objective", spec: task.Spec{Objective: -time.Second}, wantErr: true, want: task.Spec{Goal: task.DefaultGoal}},
		{
			name: "other fields kept",
			spec: task.Spec{Key: "tenant-1", Class: "GET /a", Kind: task.Background, Cancellable: true,
				Priority: task.Priority{Business: 2, User: 3}, Path: "db", Goal: -2},
			wantErr: true,
			want: task.Spec{Key: "tenant-1", Class: "GET /a", Kind: task.Background, Cancellable: true,
				Priority: task.Priority{Business: 2, User: 3}, Path: "db", Goal: task.DefaultGoal},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, task.ErrInvalidSpec) {
				t.Errorf("Validate() = %v, want it to wrap ErrInvalidSpec", err)
			}

			tt.want.MaxDeferral = tt.want.Goal // one value under both names
			e := newEnv(t, task.Options{})
			_, tk := e.begin(t, tt.spec)
			if diff := cmp.Diff(tt.want, tk.Spec()); diff != "" {
				t.Errorf("Spec() after Begin mismatch (-want +got):\n%s", diff)
			}
			wantInvalid := int64(0)
			if tt.wantErr {
				wantInvalid = 1
			}
			if got := e.reg.Stats().InvalidSpecs; got != wantInvalid {
				t.Errorf("Stats().InvalidSpecs = %d, want %d", got, wantInvalid)
			}
			reps := e.reports.get()
			if len(reps) != int(wantInvalid) {
				t.Fatalf("Report got %v, want %d errors", reps, wantInvalid)
			}
			if tt.wantErr && reps[0].Error() != err.Error() {
				t.Errorf("Report got %q, want the error Validate returns, %q", reps[0], err)
			}
			if tk.Spec().Validate() != nil {
				t.Errorf("the spec Begin kept does not validate: %v", tk.Spec().Validate())
			}
		})
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		in      string
		want    task.Kind
		wantErr bool
	}{
		{in: "request", want: task.Request},
		{in: "background", want: task.Background},
		{in: "", want: task.Request},
		{in: "  Background\t", want: task.Background},
		{in: "REQUEST", want: task.Request},
		{in: "batch", wantErr: true},
		{in: "kind(2)", wantErr: true},
		{in: "requests", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := task.ParseKind(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseKind(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "task: ") || !strings.Contains(err.Error(), tt.in) {
					t.Errorf("ParseKind(%q) error = %q, want the package prefix and the input", tt.in, err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("ParseKind(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}

	for _, k := range []task.Kind{task.Request, task.Background} {
		got, err := task.ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	if got, want := task.Kind(7).String(), "kind(7)"; got != want {
		t.Errorf("Kind(7).String() = %q, want %q", got, want)
	}
}

func TestPriority(t *testing.T) {
	tests := []struct {
		name string
		p, q task.Priority
		want bool
	}{
		{name: "equal", p: task.Priority{}, q: task.Priority{}, want: false},
		{name: "business first", p: task.Priority{Business: 0, User: 9}, q: task.Priority{Business: 1, User: 0}, want: true},
		{name: "business last", p: task.Priority{Business: 1, User: 0}, q: task.Priority{Business: 0, User: 9}, want: false},
		{name: "then user", p: task.Priority{Business: 1, User: 2}, q: task.Priority{Business: 1, User: 3}, want: true},
		{name: "user last", p: task.Priority{Business: 1, User: 3}, q: task.Priority{Business: 1, User: 2}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Less(tt.q); got != tt.want {
				t.Errorf("%v.Less(%v) = %v, want %v", tt.p, tt.q, got, tt.want)
			}
			if tt.p.Less(tt.q) && tt.q.Less(tt.p) {
				t.Errorf("Less is not antisymmetric for %v, %v", tt.p, tt.q)
			}
		})
	}
	if got, want := (task.Priority{Business: 3, User: 250}).String(), "3/250"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"request", "background", "", " Request ", "BACKGROUND", "kind(3)", "bac\u212aground", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := task.ParseKind(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "task: unknown kind") {
				t.Fatalf("ParseKind(%q) error = %q", s, err)
			}
			return
		}
		if k != task.Request && k != task.Background {
			t.Fatalf("ParseKind(%q) = %v, a kind that does not exist", s, k)
		}
		if err := (task.Spec{Kind: k}).Validate(); err != nil {
			t.Fatalf("ParseKind(%q) = %v, which Validate refuses: %v", s, k, err)
		}
		back, err := task.ParseKind(k.String())
		if err != nil || back != k {
			t.Fatalf("ParseKind(%q) = %v, but ParseKind(%q) = %v, %v", s, k, k.String(), back, err)
		}
	})
}

// TestBeginNilParent checks that Begin panics on a nil parent, as
// context.WithCancel does.
func TestBeginNilParent(t *testing.T) {
	e := newEnv(t, task.Options{})
	defer func() {
		if recover() == nil {
			t.Error("Begin(nil) did not panic")
		}
		if n := e.reg.Len(); n != 0 {
			t.Errorf("Len() = %d after a failed Begin, want 0", n)
		}
	}()
	var nilCtx context.Context
	e.reg.Begin(nilCtx, task.Spec{})
}

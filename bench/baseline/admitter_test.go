package baseline_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// admitters are every implementation of Admitter, with their defaults; each
// runs the contract tests below.
var admitters = []struct {
	name string
	new  func() admit.Admitter
}{
	{"codel", func() admit.Admitter { return baseline.NewCoDel() }},
	{"codel-rpc", func() admit.Admitter { return baseline.NewRPCCoDel() }},
	{"breakwater", func() admit.Admitter { return baseline.NewBreakwater() }},
	{"dagor", func() admit.Admitter { return admit.NewDAGOR() }},
	{"random", func() admit.Admitter { return baseline.NewRandom(0, 0, 0) }},
}

// TestAdmitterContract checks what every Admitter does: it has its name, it
// admits and serves a light load without dropping anything, and its calls
// do not allocate.
func TestAdmitterContract(t *testing.T) {
	for _, tt := range admitters {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.new()
			if got := a.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
			// A light load: one request at a time, 100 µs in the queue,
			// 1 ms of service, for 10 s.
			for now := time.Duration(0); now < 10*time.Second; now += 2 * time.Millisecond {
				if !a.Admit(now) {
					t.Fatalf("Admit(%v) = false under light load", now)
				}
				if !a.Started(now+100*time.Microsecond, 100*time.Microsecond) {
					t.Fatalf("Started(%v) = false under light load", now)
				}
				a.Done(now+1100*time.Microsecond, time.Millisecond)
			}
			now := 10 * time.Second
			allocs := testing.AllocsPerRun(1000, func() {
				now += time.Millisecond
				if a.Admit(now) && a.Started(now, 20*time.Millisecond) {
					a.Done(now, time.Millisecond)
				}
			})
			if allocs != 0 {
				t.Errorf("Admit, Started, Done allocate %v times", allocs)
			}
		})
	}
}

// TestAdmitterConcurrent hammers each Admitter from several goroutines, for
// the race detector, and checks the accounting once they are done.
func TestAdmitterConcurrent(t *testing.T) {
	const (
		workers  = 8
		requests = 2000
	)
	for _, tt := range admitters {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.new()
			var (
				clock    atomic.Int64 // a shared monotonic clock, 50 µs a tick
				admitted atomic.Int64
				started  atomic.Int64
				wg       sync.WaitGroup
			)
			tick := func() time.Duration { return time.Duration(clock.Add(int64(50 * time.Microsecond))) }
			for w := range workers {
				wg.Go(func() {
					for i := range requests {
						arrived := tick()
						if !a.Admit(arrived) {
							continue
						}
						admitted.Add(1)
						// Queueing delays from 0 to 20 ms, so that both
						// admitters go through their overload states.
						delay := time.Duration((w*requests+i)%21) * time.Millisecond
						if !a.Started(tick(), delay) {
							continue
						}
						started.Add(1)
						a.Done(tick(), time.Millisecond)
					}
				})
			}
			wg.Wait()
			if admitted.Load() == 0 || started.Load() == 0 {
				t.Fatalf("admitted %d, started %d: want some of each", admitted.Load(), started.Load())
			}
			switch a := a.(type) {
			case *baseline.Breakwater:
				if n := a.InFlight(); n != 0 {
					t.Errorf("InFlight() = %d after every request is done, want 0", n)
				}
				if c := a.Credits(); c < 1 || c > baseline.DefaultBreakwaterMaxCredits {
					t.Errorf("Credits() = %d, out of bounds", c)
				}
			case *baseline.CoDel:
				if got, want := a.Drops(), admitted.Load()-started.Load(); got != want {
					t.Errorf("Drops() = %d, want %d", got, want)
				}
			}
		})
	}
}

// BenchmarkAdmit measures an admission and, when it succeeds, the Done that
// returns its credit, so that Breakwater keeps admitting rather than
// measuring its refusal path (CoDel's Done does nothing).
func BenchmarkAdmit(b *testing.B) {
	for _, tt := range admitters {
		b.Run(tt.name, func(b *testing.B) {
			a := tt.new()
			b.ReportAllocs()
			var now time.Duration
			for b.Loop() {
				now += time.Microsecond
				if a.Admit(now) {
					a.Done(now, 0)
				}
			}
		})
	}
}

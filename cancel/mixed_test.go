package cancel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
)

// Two fan-out reports over one pool, of the class of the pool's light
// lookups (a Handler mounted where it sees only the outer mux's "GET /"):
// the class's history is the lookups', so the newcomer report looked light
// ("no gain") and the old one, nearly done, was the only candidate. The
// old report working on the pool for seconds makes the class mixed: its
// history is not trusted, the newcomer's gain comes from the pool's demand
// and the old report, which would lose most, is kept. Generated: random
// pool sizes, holds, ages, progress, lookups and waiters; the class merged
// or the route's. Replay a failure with its seed.
func TestMixedClassKeepsTheOlderReport(t *testing.T) {
	const seeds = 300
	mixedSeen := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 43))
		capacity := int64(6 + rng.IntN(15))
		old := capacity/2 + rng.Int64N(capacity/2-1)
		newcomer := capacity - old + rng.Int64N(2)
		waiters := 1 + rng.IntN(int(capacity-old))
		merged := rng.IntN(4) != 0
		light, report := "GET /", "GET /"
		if !merged {
			light, report = "GET /item/{id}", "GET /report"
		}
		minGain := time.Duration(10+rng.IntN(16)) * ms
		a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(minGain))
		var at time.Duration
		for range 3 + rng.IntN(50) {
			teach(a, &at, light, "db-pool", capacity, 1, time.Duration(1+rng.IntN(5))*ms)
		}
		oldAge := time.Duration(2000+rng.IntN(8000)) * ms
		var done, total int64
		if rng.IntN(2) == 0 {
			done, total = int64(30+rng.IntN(66)), 100
		}
		newAge := time.Duration(5+rng.IntN(100)) * ms
		b := newBuilder(5*ms).res("db-pool", resource.KindQueue, capacity, 0.3+rng.Float64()/2, waiters)
		b.s.Resources[0].Held = capacity
		b.task(1, report, true, done, total, oldAge, use{res: 0, held: old, hold: oldAge})
		b.task(2, report, true, 0, 0, newAge, use{res: 0, held: newcomer, hold: newAge})
		for i := range waiters {
			b.task(uint64(10+i), light, true, 0, 0, time.Duration(1+rng.IntN(30))*ms, use{res: 0, waiting: true})
		}
		s := b.build()
		s.At = at + time.Second
		a.Observe(s)
		ev := a.Evaluate(s)
		desc := fmt.Sprintf("seed %d: pool %d, old report %d units for %v (progress %d/%d), newcomer %d for %v, %d waiters, class merged %v, min gain %v",
			seed, capacity, old, oldAge, done, total, newcomer, newAge, waiters, merged, minGain)
		if ev.Chosen < 0 || ev.Candidates[ev.Chosen].Task != 2 {
			t.Errorf("%s: chose %+v (no gain: %+v); want the newcomer 2; reason %q", desc, ev.Candidates, ev.NoGainTasks, ev.Reason)
			continue
		}
		if merged && mixedSeen == 0 {
			// The finding is reported once, as a diagnosis naming the class.
			var diag []policy.Decision
			for range 2 {
				for _, d := range a.Decide(s) {
					if d.Action == policy.Diagnose {
						diag = append(diag, d)
					}
				}
			}
			if len(diag) != 1 || diag[0].Class != "GET /" || !strings.Contains(diag[0].Reason, "httpmw.WithClass") {
				t.Errorf("%s: diagnoses %+v; want one, naming the class and the remedy", desc, diag)
			}
		}
		if merged {
			mixedSeen++
			if len(ev.Mixed) != 1 || ev.Mixed[0].Class != "GET /" || !strings.Contains(ev.Reason, `class "GET /" is mixed`) {
				t.Errorf("%s: mixed %+v, reason %q; want the class named mixed", desc, ev.Mixed, ev.Reason)
			}
		} else if len(ev.Mixed) != 0 {
			t.Errorf("%s: classes of their own reported mixed: %+v", desc, ev.Mixed)
		}
	}
	t.Logf("%d seeds, %d with the class merged", seeds, mixedSeen)
}

// A light class whose requests hold a worker slot while they wait behind
// a lock, seconds at a time, is not mixed: what a task holds while it
// waits for another resource is not its work. Nor is a light request
// stalled for a few times the minimum gain while it holds.
func TestLightClassStalledIsNotMixed(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(25*ms))
	var at time.Duration
	for range 20 {
		teach(a, &at, "insert", "workers", 8, 1, 2*ms)
	}
	b := newBuilder(5*ms).res("workers", resource.KindQueue, 8, 0.5, 4).res("table", resource.KindLock, 1, 0.5, 6)
	b.task(1, "insert", true, 0, 0, 3*time.Second, use{res: 0, held: 1, hold: 3 * time.Second}, use{res: 1, waiting: true})
	b.task(2, "insert", true, 0, 0, 150*ms, use{res: 0, held: 1, hold: 150 * ms})
	s := b.build()
	s.Usage[1].Wait = 3 * time.Second
	s.Tasks[0].Blocked = false // even seen unblocked as it takes the lock
	a.Observe(s)
	if res, typ, peak, ok := a.uses.Mixed("insert", (25 * ms).Seconds()); ok {
		t.Fatalf("insert mixed on %s (typical %.4g, peak %.4g); want not", res, typ, peak)
	}
}

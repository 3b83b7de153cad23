package estimate

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Generated histories (seeded): a light class whose tasks hold a lock for
// 1–3 ms, with bursts of 10–30 tasks in a row stalled for 50–200 ms (the
// victims of an overload), and a heavy class whose tasks hold it for 1–3
// s. By construction the light class's typical use stays under 25 ms and
// the heavy class's is over it from its first task on, whatever the mean
// says in between.
func TestTypicalGenerated(t *testing.T) {
	const floor = 0.025
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		u := NewUses(0)
		at := time.Duration(0)
		end := func(class string, hold time.Duration) {
			at += 5 * time.Millisecond
			u.Observe(&snapshot.Snapshot{At: at, Window: 5 * time.Millisecond,
				Resources: []snapshot.Resource{{Name: "lock", Kind: resource.KindLock}},
				Tasks:     []snapshot.Task{{ID: uint64(at), Class: class, N: 1}},
				Usage:     []snapshot.Usage{{Usage: task.Usage{Held: 1, Hold: hold}}}})
			at += 5 * time.Millisecond
			u.Observe(&snapshot.Snapshot{At: at, Window: 5 * time.Millisecond,
				Resources: []snapshot.Resource{{Name: "lock", Kind: resource.KindLock}}})
		}
		meanOver := false
		for i := range 400 {
			// The light class's first task is not stalled: a class whose
			// first task was looks heavy until a few lighter ones (four
			// or five) bring its envelope down.
			if i > 0 && rng.IntN(40) == 0 {
				for range 10 + rng.IntN(21) {
					end("light", time.Duration(50+rng.IntN(151))*time.Millisecond)
				}
			} else {
				end("light", time.Duration(1+rng.IntN(3))*time.Millisecond)
			}
			if m, _ := u.Total("light", "lock"); m >= floor {
				meanOver = true
			}
			if v, _ := u.Typical("light", "lock"); v >= floor {
				t.Fatalf("seed %d: the light class's typical use %.3f s reached %.3f s", seed, v, floor)
			}
			if rng.IntN(50) == 0 {
				end("heavy", time.Duration(1000+rng.IntN(2001))*time.Millisecond)
				if v, ok := u.Typical("heavy", "lock"); !ok || v < floor {
					t.Fatalf("seed %d: the heavy class's typical use %.3f s under %.3f s", seed, v, floor)
				}
			}
		}
		if seed == 1 && !meanOver {
			t.Logf("seed 1: the mean never reached the floor either")
		}
	}
}

package waitq_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/internal/waitq"
)

type waiter struct {
	id int
	waitq.Links[waiter]
}

func (w *waiter) WaitLinks() *waitq.Links[waiter] { return &w.Links }

type queue = waitq.Queue[waiter, *waiter]

func ids(q *queue) []int {
	var out []int
	for w := q.Front(); w != nil; w = q.Next(w) {
		out = append(out, w.id)
	}
	return out
}

// TestAgainstSlice drives a queue and a plain slice with the same random
// pushes and removals, seeded and replayable, and compares them after
// every step.
func TestAgainstSlice(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	var q queue
	var model []int
	ws := make([]*waiter, 64)
	for i := range ws {
		ws[i] = &waiter{id: i}
	}
	for step := range 20000 {
		w := ws[rng.IntN(len(ws))]
		switch rng.IntN(3) {
		case 0:
			if !w.Queued() {
				q.PushBack(w)
				model = append(model, w.id)
			}
		case 1:
			if !w.Queued() {
				q.PushFront(w)
				model = slices.Insert(model, 0, w.id)
			}
		case 2:
			q.Remove(w) // a no-op when w is in no queue
			if i := slices.Index(model, w.id); i >= 0 {
				model = slices.Delete(model, i, i+1)
			}
		}
		if got := ids(&q); !slices.Equal(got, model) || q.Len() != len(model) {
			t.Fatalf("seed %d, step %d: queue %v (len %d), want %v", seed, step, got, q.Len(), model)
		}
	}
}

func TestEmpty(t *testing.T) {
	var q queue
	w := &waiter{}
	q.Remove(w)
	if q.Front() != nil || q.Len() != 0 || w.Queued() {
		t.Fatal("an empty queue is not empty")
	}
}

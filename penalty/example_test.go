package penalty_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/penalty"
)

// Penalties are in moirai.New's defaults, beside cancellation; with
// mechanisms of your own, put penalty.New() in the list.
func ExamplePolicy() {
	p := penalty.New()
	ctl := moirai.New(moirai.WithPolicy(p))
	defer ctl.Close()
	st := p.Stats()
	fmt.Println(p.Name(), st.Penalties)
	// Output: pbox 0
}

// Options bound the penalties' length.
func ExampleOption() {
	p := penalty.New(penalty.WithMinPenalty(time.Millisecond), penalty.WithMaxPenalty(200*time.Millisecond))
	fmt.Println(p.Name())
	// Output: pbox
}

// A noisy stream's penalties are sized to keep its requests within a
// factor of their uncontrolled latency: 1.3 by default, 1.2 here for a
// stream whose own latency matters more.
func ExampleWithMaxSlowdown() {
	p := penalty.New(penalty.WithMaxSlowdown(1.2))
	ctl := moirai.New(moirai.WithPolicy(p))
	defer ctl.Close()
	fmt.Println(p.Name())
	// Output: pbox
}

// Stats reports the penalties decided, how their lengths adapted, and per
// noisy class how many adaptations it took to reach a fixed length.
func ExampleStats() {
	st := penalty.New().Stats()
	fmt.Println(st.Penalties, st.ScoreBased, st.GapBased, st.Capped, len(st.Steps))
	// Output: 0 0 0 0 0
}

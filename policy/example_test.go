package policy_test

import (
	"fmt"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// biggest is a toy policy: it proposes to cancel the longest-running
// cancellable task whenever a detector fires, and confirms resource
// overload only when some task waits for a resource. It learns nothing
// between decisions, so it implements Observer trivially.
type biggest struct{ steps int }

func (p *biggest) Name() string { return "biggest" }

func (p *biggest) Decide(s *snapshot.Snapshot) []policy.Decision {
	var best *snapshot.Task
	for i := range s.Tasks {
		if t := &s.Tasks[i]; t.Cancellable && !t.Cancelled && (best == nil || t.Age > best.Age) {
			best = t
		}
	}
	if best == nil {
		return nil
	}
	return []policy.Decision{{Action: policy.Cancel, Task: best.ID, Reason: "the oldest cancellable task"}}
}

// Confirm makes biggest a policy.Confirmer.
func (p *biggest) Confirm(s *snapshot.Snapshot) bool {
	for _, u := range s.Usage {
		if u.Waiting > 0 {
			return true
		}
	}
	return false
}

// Observe makes biggest a policy.Observer: the loop calls it on every
// snapshot.
func (p *biggest) Observe(*snapshot.Snapshot) { p.steps++ }

var (
	_ policy.Policy    = (*biggest)(nil)
	_ policy.Confirmer = (*biggest)(nil)
	_ policy.Observer  = (*biggest)(nil)
)

// A policy plugs into the controller with moirai.WithPolicy; a Confirmer
// tells resource overload from regular overload.
func ExampleConfirmer() {
	ctl := moirai.New(moirai.WithPolicy(&biggest{}))
	defer ctl.Close()
	var s snapshot.Snapshot
	fmt.Println((&biggest{}).Confirm(&s))
	// Output: false
}

// An Observer learns from every snapshot, whether a detector fires or
// not.
func ExampleObserver() {
	p := &biggest{}
	var s snapshot.Snapshot
	for range 3 {
		p.Observe(&s)
	}
	fmt.Println(p.steps)
	// Output: 3
}

// A Continuous policy decides on every step, not only while a detector
// fires (package penalty's is one).
func ExampleContinuous() {
	var c policy.Continuous = watcher{}
	fmt.Println(c.Watching())
	// Output: false
}

type watcher struct{}

func (watcher) Watching() bool { return false }

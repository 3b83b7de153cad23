package demo

import (
	"cmp"
	"slices"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// maxTasks is how many tasks a refresh lists: one screen.
const maxTasks = 8

// View is what one refresh shows: a runtime snapshot reduced to what a
// person reads, plus the scenario's own bookkeeping.
type View struct {
	Elapsed  time.Duration // since the load started
	Interval time.Duration // since the previous refresh, by the controller clock (0 for the first)
	Scenario Scenario
	Live     int // live tasks the runtime sees
	// Resources in registration order.
	Resources []ResourceView
	// Tasks that hold or wait for a resource, longest first, at most
	// maxTasks; More counts those left out.
	Tasks []TaskView
	More  int
	// Decisions the controller has taken so far, and the last of them.
	Decisions    int
	LastDecision *Decision
}

// Scenario is where the demo's scenario is, from the load generator's and
// the service's bookkeeping rather than from the runtime.
type Scenario struct {
	Sent           int64  `json:"sent"` // inserts
	Done           int64  `json:"done"`
	InFlight       int64  `json:"in_flight"`
	CulpritState   string `json:"culprit_state"`
	CulpritBatch   int    `json:"culprit_batch"`
	CulpritBatches int    `json:"culprit_batches"`
}

// ResourceView is one resource as the runtime sees it.
type ResourceView struct {
	Name             string
	Kind             string
	Holders, Waiters int
	HeldBy           []Holder // the live tasks holding it
	// Wait and Hold accrued by every task since the previous refresh.
	Wait, Hold time.Duration
	// TotalWait and TotalHold since the start.
	TotalWait, TotalHold time.Duration
}

// Holder is a task holding a resource.
type Holder struct {
	ID    uint64
	Class string
}

// TaskView is one live task: what it holds and waits for, and how long it
// has.
type TaskView struct {
	ID         uint64
	Class, Key string
	Age        time.Duration
	Progress   float64 // fraction done; negative if the task reports none
	Holds      []Use   // resources held now, with the task's hold time on each
	Waits      []Use   // resources waited for now, with the task's wait time on each
	score      time.Duration
}

// Use is a task's time on one resource.
type Use struct {
	Resource string
	For      time.Duration
}

// cumulative is a resource's totals at the previous refresh.
type cumulative struct {
	wait, hold time.Duration
}

// buildView reduces s to a View, listing at most top tasks. prev holds each
// resource's totals at the previous refresh; buildView updates it. It reads
// nothing but its arguments.
func buildView(s *snapshot.Snapshot, prev map[string]cumulative, top int, at time.Duration) View {
	v := View{Live: len(s.Tasks)}
	if at > 0 {
		v.Interval = s.At - at
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		p := prev[r.Name]
		v.Resources = append(v.Resources, ResourceView{
			Name: r.Name, Kind: r.Kind.String(),
			Holders: r.Holders, Waiters: r.Waiters,
			Wait: max(r.Wait-p.wait, 0), Hold: max(r.Hold-p.hold, 0),
			TotalWait: r.Wait, TotalHold: r.Hold,
		})
		prev[r.Name] = cumulative{wait: r.Wait, hold: r.Hold}
	}
	var tasks []TaskView
	for i := range s.Tasks {
		t := &s.Tasks[i]
		tv := TaskView{ID: t.ID, Class: t.Class, Key: t.Key, Age: t.Age, Progress: -1}
		if p, ok := t.Progress(); ok {
			tv.Progress = p
		}
		for _, u := range s.UsageOf(i) {
			name := s.Resources[u.Res].Name
			if u.Held > 0 {
				rv := &v.Resources[u.Res]
				rv.HeldBy = append(rv.HeldBy, Holder{t.ID, t.Class})
				tv.Holds = append(tv.Holds, Use{name, u.Hold})
				tv.score = max(tv.score, u.Hold)
			}
			if u.Waiting > 0 {
				tv.Waits = append(tv.Waits, Use{name, u.Wait})
				tv.score = max(tv.score, u.Wait)
			}
		}
		if len(tv.Holds) > 0 || len(tv.Waits) > 0 {
			tasks = append(tasks, tv)
		}
	}
	slices.SortFunc(tasks, func(a, b TaskView) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(tasks) > top {
		v.More = len(tasks) - top
		tasks = tasks[:top]
	}
	v.Tasks = tasks
	return v
}

// resource returns the named resource's view, or nil.
func (v *View) resource(name string) *ResourceView {
	for i := range v.Resources {
		if v.Resources[i].Name == name {
			return &v.Resources[i]
		}
	}
	return nil
}

// holding reports whether a task of the given class holds the named
// resource.
func (v *View) holding(name, class string) bool {
	if r := v.resource(name); r != nil {
		for _, h := range r.HeldBy {
			if h.Class == class {
				return true
			}
		}
	}
	return false
}

package mwx

import (
	"time"

	"github.com/moirai-go/moirai/task"
)

// Routes are the per-class settings httpmw and grpcmw share: an objective
// per class or for every class, and which classes are background work.
// The zero value sets nothing.
type Routes struct {
	objective    time.Duration // every class's, when objectiveSet
	objectiveSet bool
	objectives   map[string]time.Duration // per class
	background   bool                     // every class is background
	backgrounds  map[string]bool          // per class
}

// SetObjective sets d as the objective of classes, or of every class when
// none is given. A negative d other than task.NoObjective is ignored.
func (r *Routes) SetObjective(d time.Duration, classes []string) {
	if d < 0 && d != task.NoObjective {
		return
	}
	if len(classes) == 0 {
		r.objective, r.objectiveSet = d, true
		return
	}
	if r.objectives == nil {
		r.objectives = map[string]time.Duration{}
	}
	for _, c := range classes {
		r.objectives[c] = d
	}
}

// SetBackground marks classes, or every class when none is given, as
// background work.
func (r *Routes) SetBackground(classes []string) {
	if len(classes) == 0 {
		r.background = true
		return
	}
	if r.backgrounds == nil {
		r.backgrounds = map[string]bool{}
	}
	for _, c := range classes {
		r.backgrounds[c] = true
	}
}

// Apply sets in sp the objective and kind the settings give class.
func (r *Routes) Apply(sp *task.Spec, class string) {
	if d, ok := r.objectives[class]; ok {
		sp.Objective = d
	} else if r.objectiveSet {
		sp.Objective = r.objective
	}
	if r.background || r.backgrounds[class] {
		sp.Kind = task.Background
	}
}

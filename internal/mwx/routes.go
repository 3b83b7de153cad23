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
	background   ClassSet                 // background classes
}

// ClassSet is a set of classes, or of every class. The zero value is
// empty.
type ClassSet struct {
	all     bool
	classes map[string]bool
}

// Add adds classes to s, or every class when none is given.
func (s *ClassSet) Add(classes []string) {
	if len(classes) == 0 {
		s.all = true
		return
	}
	if s.classes == nil {
		s.classes = map[string]bool{}
	}
	for _, c := range classes {
		s.classes[c] = true
	}
}

// Has reports whether s holds class.
func (s *ClassSet) Has(class string) bool { return s.all || (len(s.classes) > 0 && s.classes[class]) }

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
func (r *Routes) SetBackground(classes []string) { r.background.Add(classes) }

// PerClass reports whether a setting names classes: whether what Apply
// sets depends on the class.
func (r *Routes) PerClass() bool { return len(r.objectives) > 0 || len(r.background.classes) > 0 }

// Apply sets in sp the objective and kind the settings give class.
func (r *Routes) Apply(sp *task.Spec, class string) {
	d, set := r.objective, r.objectiveSet
	if len(r.objectives) > 0 { // most middleware names no class: no map to look in
		if od, ok := r.objectives[class]; ok {
			d, set = od, true
		}
	}
	if set {
		sp.Objective = d
	}
	if r.background.Has(class) {
		sp.Kind = task.Background
	}
}

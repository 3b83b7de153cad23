package cancel

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/moirai-go/moirai/policy"
)

// MixedClass is a class whose tasks use a resource in amounts that differ
// by orders of magnitude (estimate.Uses.Mixed): typically Typical
// resource-seconds, while one of them used Peak. Its history is not
// trusted: neither a newcomer's gain nor an old holder's end is taken
// from it.
type MixedClass struct {
	Class, Resource string
	Typical, Peak   float64
}

// maxDiagnosedMixed bounds the classes reported mixed once.
const maxDiagnosedMixed = 1024

// diagnoseMixed returns a Diagnose decision for each class found mixed
// (see [MixedClass]) since the last step, once per class: the operator
// learns that the class merges work of different weights, which a class
// of its own per route (httpmw.WithClass, or the middleware around the
// mux that routes) would tell apart.
func (a *Atropos) diagnoseMixed() []policy.Decision {
	if a.variant == CurrentUsage {
		return nil
	}
	var ds []policy.Decision
	a.uses.Risen(func(class string) {
		if a.mixedSaid[class] || len(a.mixedSaid) >= maxDiagnosedMixed {
			return
		}
		res, typ, peak, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds())
		if !ok {
			return
		}
		if a.mixedSaid == nil {
			a.mixedSaid = map[string]bool{}
		}
		a.mixedSaid[class] = true
		ds = append(ds, policy.Decision{Policy: a.Name(), Action: policy.Diagnose, Class: class,
			Reason: fmt.Sprintf("class %q is mixed: its tasks use %.4g resource-s of %s typically, one used %.4g; its history is not trusted for gains and losses (they come from each task's own holds, progress and age); give each kind of work a class of its own (the route: httpmw.Handler around the ServeMux that routes it, or httpmw.WithClass)",
				class, typ, res, peak),
			Details: []slog.Attr{slog.String("resource", res), slog.Float64("typical_resource_s", typ), slog.Float64("peak_resource_s", peak)}})
	})
	return ds
}

// noteMixed lists class in ev.Mixed, once, up to maxListed classes.
func (a *Atropos) noteMixed(ev *Evaluation, class string) {
	if len(ev.Mixed) >= maxListed || slices.ContainsFunc(ev.Mixed, func(m MixedClass) bool { return m.Class == class }) {
		return
	}
	if res, typ, peak, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds()); ok {
		ev.Mixed = append(ev.Mixed, MixedClass{Class: class, Resource: res, Typical: typ, Peak: peak})
	}
}

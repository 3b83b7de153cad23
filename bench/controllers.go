package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// Admitter is an admission controller in front of a service's worker
// slots.
type Admitter = admit.Admitter

// Controller is a named configuration of moirai the harness runs cases
// under.
type Controller struct {
	Name     string
	Describe string
	// Options returns the moirai options of a run of a case whose light
	// requests have the latency objective slo.
	Options func(slo time.Duration) []moirai.Option
	// Admitter, if set, returns the run's admission controller.
	Admitter func(slo time.Duration) Admitter
	// Reexecute serves every request through moirai.Retry, so that a
	// request the controller cancels is re-executed once the resources it
	// used are free, as Atropos does.
	Reexecute bool
	// Tune, if set, makes the controller tunable: it returns the
	// controller at a setting, named NAME@SETTING, or an error for a
	// setting it does not take. Sweep is the grid NAME@sweep expands to,
	// the default left out (it is the controller's own row).
	Tune  func(setting string) (Controller, error)
	Sweep []string
}

var (
	controllersMu sync.Mutex
	controllers   []Controller
)

// RegisterController adds a controller. It panics on a duplicate name.
func RegisterController(c Controller) {
	controllersMu.Lock()
	defer controllersMu.Unlock()
	if slices.ContainsFunc(controllers, func(o Controller) bool { return o.Name == c.Name }) {
		panic(fmt.Sprintf("bench: controller %q registered twice", c.Name))
	}
	controllers = append(controllers, c)
}

// Controllers returns the registered controllers in registration order.
func Controllers() []Controller {
	controllersMu.Lock()
	defer controllersMu.Unlock()
	return slices.Clone(controllers)
}

// SelectControllers resolves a comma-separated list of controller names,
// or "all". Unknown names are an error that lists the valid ones. A
// tunable controller (one with Tune) also takes NAME@SETTING, and
// NAME@sweep for its grid of settings.
func SelectControllers(list string) ([]Controller, error) {
	if list == "" || list == "all" {
		return Controllers(), nil
	}
	var out []Controller
	add := func(c Controller) {
		if !slices.ContainsFunc(out, func(o Controller) bool { return o.Name == c.Name }) {
			out = append(out, c)
		}
	}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		base, setting, tuned := strings.Cut(n, "@")
		if !tuned {
			cs, err := SelectByName(n, "controller", Controllers(), func(c Controller) string { return c.Name })
			if err != nil {
				return nil, err
			}
			add(cs[0])
			continue
		}
		cs, err := SelectByName(base, "controller", Controllers(), func(c Controller) string { return c.Name })
		if err != nil {
			return nil, err
		}
		c := cs[0]
		if c.Tune == nil {
			return nil, fmt.Errorf("%w: controller %q takes no setting", ErrUnknown, base)
		}
		settings := []string{setting}
		if setting == "sweep" {
			settings = c.Sweep
		}
		for _, st := range settings {
			t, err := c.Tune(st)
			if err != nil {
				return nil, fmt.Errorf("controller %q: %w", base+"@"+st, err)
			}
			t.Name, t.Tune, t.Sweep = base+"@"+st, nil, nil
			add(t)
		}
	}
	return out, nil
}

// harnessTicks are the loop periods of every run: fine enough that a
// policy reacts within the runs' time scale.
func harnessTicks() []moirai.Option {
	return []moirai.Option{moirai.WithTick(10*time.Millisecond, 5*time.Millisecond)}
}

// HarmlessKey is the task key a case gives a culprit-class task that is
// harmless alone (the first of two heavy holders): the oracle controller
// never cancels it.
const HarmlessKey = "bench:harmless-alone"

// oracle is the limit of any cancellation policy: it knows the culprits
// (the tasks of a culprit class not keyed HarmlessKey) and the work each
// would lose, and cancels the least-loss one as soon as it holds anything
// other than the harness's worker slot.
type oracle struct{}

func (oracle) Name() string { return "oracle" }

func (oracle) Decide(s *snapshot.Snapshot) []policy.Decision {
	return decideOracle(s, nil, "oracle: culprit at its first acquisition")
}

// oracleEvidence knows the culprits as the oracle does, but cancels one
// only once another task has waited on a resource it holds or evicts
// from since the last step (a lock or a slot it holds, a page or a result
// it pushed out and another task missed): the first sign of harm to the
// others, before which a policy that leaves honest heavy work alone cannot
// act. It is the limit of such policies, as the oracle is of all. It
// counts the waits begun (the resource's, less the culprits' own), not
// those in progress, which a step can fall between.
type oracleEvidence struct {
	seen []int64              // per resource: waits begun by every task, at the last step (nil before the first)
	mine map[culpritRes]int64 // per culprit-class task and resource: its waits begun, at the last step
}

// culpritRes is a culprit-class task's use of a resource of a snapshot.
type culpritRes struct {
	task uint64
	res  int32
}

func (*oracleEvidence) Name() string { return "oracle-evidence" }

func (o *oracleEvidence) Decide(s *snapshot.Snapshot) []policy.Decision {
	n := len(s.Resources)
	// Every culprit-class task's own waits are no harm to the others,
	// cancelled or harmless-keyed ones included.
	own := make([]int64, n) // the culprits' waits begun since the last step
	mine := map[culpritRes]int64{}
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !strings.HasPrefix(t.Class, culpritClass) {
			continue
		}
		for _, u := range s.UsageOf(ti) {
			if u.Res >= 0 && int(u.Res) < n {
				k := culpritRes{t.ID, u.Res}
				mine[k] = u.Waits
				own[u.Res] += u.Waits - o.mine[k]
			}
		}
	}
	waited := make([]bool, n)
	harm := false
	if len(o.seen) == n {
		for i := range s.Resources {
			if s.Resources[i].Waits-o.seen[i]-own[i] > 0 {
				waited[i], harm = true, true
			}
		}
	}
	o.seen, o.mine = o.seen[:0], mine
	for i := range s.Resources {
		o.seen = append(o.seen, s.Resources[i].Waits)
	}
	if !harm {
		return nil
	}
	return decideOracle(s, waited, "oracle-evidence: culprit at the first wait of another task on what it holds or evicts from")
}

// isCulprit reports whether t is a culprit the oracles may cancel.
func isCulprit(t *snapshot.Task) bool {
	return t.Cancellable && !t.Cancelled && t.Key != HarmlessKey && strings.HasPrefix(t.Class, culpritClass)
}

// decideOracle cancels the culprit that loses least among those holding,
// or having evicted from, a resource other than the harness's worker
// slots; when waited is not nil, one that others wait on which it holds,
// or, a Memory, evicted from.
func decideOracle(s *snapshot.Snapshot, waited []bool, why string) []policy.Decision {
	best, bestLoss := -1, 0.0
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !isCulprit(t) {
			continue
		}
		holds := false
		for _, u := range s.UsageOf(ti) {
			if u.Res < 0 || int(u.Res) >= len(s.Resources) || s.Resources[u.Res].Name == workersName {
				continue
			}
			switch {
			case waited == nil:
				holds = holds || u.Held > 0 || u.Evictions > 0
			case waited[u.Res] && s.Resources[u.Res].Kind == resource.KindMemory:
				// A miss is the culprit's doing once it has pushed
				// something out.
				holds = holds || u.Evictions > 0
			case waited[u.Res]:
				holds = holds || u.Held > 0
			}
		}
		if !holds {
			continue
		}
		loss, _ := estimate.Loss(s, ti)
		if best < 0 || loss < bestLoss {
			best, bestLoss = ti, loss
		}
	}
	if best < 0 {
		return nil
	}
	return []policy.Decision{{Action: policy.Cancel, Task: s.Tasks[best].ID,
		Reason: fmt.Sprintf("%s, loses %.3f resource-s", why, bestLoss)}}
}

func init() {
	RegisterController(Controller{
		Name:     "oracle",
		Describe: "the limit of any cancellation policy: knows the culprits and cancels the least-loss one at its first acquisition; no re-execution",
		Options: func(time.Duration) []moirai.Option {
			return append(harnessTicks(), moirai.WithPolicy(oracle{}))
		},
	})
	RegisterController(Controller{
		Name:     "oracle-evidence",
		Describe: "the limit of policies that act only on harm seen: knows the culprits, and cancels the least-loss one once another task waits on (or misses in) a resource it holds or evicts from; no re-execution",
		Options: func(time.Duration) []moirai.Option {
			return append(harnessTicks(), moirai.WithPolicy(&oracleEvidence{}))
		},
	})
}

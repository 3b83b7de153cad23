package bench

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
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
// or "all". Unknown names are an error that lists the valid ones.
func SelectControllers(list string) ([]Controller, error) {
	return SelectByName(list, "controller", Controllers(), func(c Controller) string { return c.Name })
}

// harnessTicks are the loop periods of every run: fine enough that a
// policy reacts within the runs' time scale.
func harnessTicks() []moirai.Option {
	return []moirai.Option{moirai.WithTick(10*time.Millisecond, 5*time.Millisecond)}
}

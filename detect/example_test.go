package detect_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/snapshot"
)

// The SLO detector fires when more than 1 − q of the requests in its window
// (completed, or live and already late) exceed the target while throughput
// is flat or falling. A controller runs it on every snapshot; Status says
// what it sees.
func ExampleSLO() {
	slo := detect.NewSLO(0.99, 50*time.Millisecond, detect.WithWindow(time.Second), detect.WithMinSamples(50))
	var s snapshot.Snapshot // nothing has run yet
	slo.Observe(&s)
	fired, _ := slo.Detect(&s)
	st := slo.Status(&s)
	fmt.Println(slo.Name(), fired, st.Samples, st.Missed)
	// Output: slo false 0 false
}

// The collapse detector fires when the recent throughput falls below a
// fraction of the recent best while requests wait for a resource.
func ExampleCollapse() {
	c := detect.NewCollapse(0.5, detect.WithSpan(time.Second), detect.WithHorizon(10*time.Second))
	var s snapshot.Snapshot
	c.Observe(&s)
	fired, _ := c.Detect(&s)
	fmt.Println(c.Name(), fired)
	// Output: collapse false
}

// Options of both detectors, as a controller takes them (moirai.New
// installs these two by default, on the objective of moirai.WithSLO).
func ExampleSLOOption() {
	ctl := moirai.New(moirai.WithDetector(
		detect.NewSLO(0.99, 20*time.Millisecond, detect.WithFlatTolerance(0.1)),
		detect.NewCollapse(0.5, detect.WithMinRate(10)),
	))
	defer ctl.Close()
	fmt.Println(ctl.Firing())
	// Output: []
}

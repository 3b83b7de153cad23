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

// Collapse options: the span of "recent", the horizon of "the recent
// best", and the least rate worth judging.
func ExampleCollapseOption() {
	c := detect.NewCollapse(0.5, detect.WithSpan(500*time.Millisecond), detect.WithHorizon(30*time.Second), detect.WithMinRate(20))
	fmt.Println(c.Name())
	// Output: collapse
}

// SLOStatus is what the SLO detector sees in one snapshot.
func ExampleSLOStatus() {
	slo := detect.NewSLO(0.99, 50*time.Millisecond)
	var s snapshot.Snapshot
	st := slo.Status(&s)
	fmt.Println(st.Quantile, st.Target, st.Samples, st.Missed)
	// Output: 0.99 50ms 0 false
}

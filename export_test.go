package moirai

import "time"

// StepForTest runs one step of the control loop, for benchmarks.
func (c *Controller) StepForTest() time.Duration { return c.step() }

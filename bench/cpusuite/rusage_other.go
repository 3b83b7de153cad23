//go:build !unix

package cpusuite

import "time"

// processCPUTime is not measured here.
func processCPUTime() time.Duration { return 0 }

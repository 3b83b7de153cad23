//go:build unix

package cpusuite

import (
	"syscall"
	"time"
)

// processCPUTime returns the user and system time of the process so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build unix

package grpcmw_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used (user and
// system, every thread: the controller's loop and the GC included). A
// parallel benchmark's CPU time per operation is what a request costs
// the machine; unlike its wall time, it does not grow while other
// processes of a shared machine run.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package cpu

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStep measures one tick of the pool's loop on the real /proc:
// reading /proc/self/stat and /proc/stat, the window and the policy. Its
// baseline is the cheapest way to read the process's CPU time alone, one
// getrusage system call. The pct-of-CPU metric is the loop's cost at one
// step per clock tick, in percent of one CPU.
func BenchmarkStep(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("no /proc")
	}
	hz, err := ReadClockTick("/")
	if err != nil {
		b.Skip(err)
	}
	report := func(b *testing.B, start time.Time) {
		perOp := float64(time.Since(start).Nanoseconds()) / float64(b.N)
		b.ReportMetric(perOp*float64(hz)/1e9*100, "pct-of-CPU")
	}
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		var ru syscall.Rusage
		start := time.Now()
		for b.Loop() {
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		}
		report(b, start)
	})
	b.Run("moirai", func(b *testing.B) {
		p, err := NewPool(WithBudget(2), WithTick(time.Hour)) // the loop itself never ticks
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		win := newWindow(p.cfg.window)
		c := newControl(p.cpus, p.host, p.cfg.overcommit, p.cfg.grow, p.limit, p.cfg.window, time.Second/time.Duration(hz), 1)
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			p.step(win, c)
		}
		report(b, start)
	})
}

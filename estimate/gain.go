package estimate

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/internal/enum"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// The bounds of an estimated progress: they bound (1−p)/p to [0.0101, 99].
const (
	MinProgress = 0.01
	MaxProgress = 0.99
)

// Source says where a progress estimate came from.
type Source uint8

const (
	// Reported: the task reported done/total.
	Reported Source = iota + 1
	// History: its class's finished tasks, conditioned on its age.
	History
	// Lindy: no usable history; assumed half done.
	Lindy
)

// Progress returns task t's progress p in [MinProgress, MaxProgress] and
// where it came from: reported progress when t reports some that is
// evidence of its own length ([ReportedProgress]), else its class's
// history in d (nil: no history), else 1/2.
func Progress(t *snapshot.Task, d *Durations) (float64, Source) {
	if p, ok := ReportedProgress(t); ok {
		return p, Reported
	}
	if d != nil {
		if exp, ok := d.ExpectedTotal(t.Class, t.Age); ok && exp > 0 {
			return clampProgress(float64(t.Age) / float64(exp)), History
		}
	}
	return 0.5, Lindy
}

// ReportedProgress returns the progress t reports, clamped to
// MaxProgress, if it is evidence of the task's own: at least MinProgress.
// A progress under it says too little to tell a task's length by (a
// walk's first key, of a bound on the keys a walk may visit, would
// promise 99 times its hold so far, for a walk of ten keys as for one
// of a million): such a task is judged as one that reports nothing.
func ReportedProgress(t *snapshot.Task) (float64, bool) {
	p, ok := t.Progress()
	if !ok || !(p >= MinProgress) {
		return 0, false
	}
	return clampProgress(p), true
}

func clampProgress(p float64) float64 {
	switch {
	case math.IsNaN(p) || p < MinProgress:
		return MinProgress
	case p > MaxProgress:
		return MaxProgress
	}
	return p
}

// Future returns the future usage current · (1−p)/p, or 0 when current is
// not a positive finite number. p is clamped to [MinProgress, MaxProgress].
func Future(current, p float64) float64 {
	if !(current > 0) || math.IsInf(current, 0) {
		return 0
	}
	p = clampProgress(p)
	return current * (1 - p) / p
}

// Current returns task usage u's current usage of resource r, in the unit
// the package documentation gives for r's kind: held-time × share of
// capacity (seconds) for Lock, Queue, CPU and IO, counted only while u
// holds r; evicted plus held units for Memory. It is 0 for anything not
// positive and finite.
func Current(u *snapshot.Usage, r *snapshot.Resource) float64 {
	if r.Kind == resource.KindMemory {
		return float64(max(u.Evictions, 0)) + float64(max(u.Held, 0))
	}
	if u.Held <= 0 || u.Hold <= 0 {
		return 0
	}
	secs := float64(u.Hold) / float64(time.Second)
	if r.Capacity > 1 && u.Held < r.Capacity {
		return secs * float64(u.Held) / float64(r.Capacity)
	}
	return secs
}

var sourceNames = [...]string{Reported: "reported", History: "class-history", Lindy: "half-done"}

// String returns the source's name.
func (s Source) String() string { return enum.NameOr(s, sourceNames[:], "unknown") }

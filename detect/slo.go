package detect

import (
	"fmt"
	"math"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/latency"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// SLO fires when the q-quantile of request latency over a sliding window,
// live requests counted at their age, is above the target while throughput
// is flat or falling. See the package documentation.
//
// An SLO is not safe for concurrent use: the controller calls Observe and
// Detect from its loop.
type SLO struct {
	q      float64
	target time.Duration
	sloConfig
	entries []sloEntry // oldest first
	sum     latency.Histogram
	ended   uint64
	remain  []time.Duration // per resource: holders' expected remaining hold
}

type sloEntry struct {
	at    time.Duration
	ended uint64
	hist  latency.Histogram
}

// SLOOption configures [NewSLO]. SLOOptions are made by the With
// functions; they set an unexported configuration, which NewSLO applies to
// the detector it returns once all of them ran.
type SLOOption func(*sloConfig)

// sloConfig is what the SLOOptions set.
type sloConfig struct {
	window  time.Duration
	flat    float64
	minN    int
	predict *estimate.Durations // nil: live requests count at their age
}

// WithWindow sets the sliding window (default 1 s; at least 10 ms).
func WithWindow(d time.Duration) SLOOption {
	return func(c *sloConfig) { c.window = max(d, 10*time.Millisecond) }
}

// WithFlatTolerance sets how much faster the newer half of the window may
// complete requests than the older half and still count as flat (default
// 0.1: up to 10 % more). Negative values are ignored.
func WithFlatTolerance(f float64) SLOOption {
	return func(c *sloConfig) { opt.Set(&c.flat, f, f >= 0 && !math.IsInf(f, 0)) }
}

// WithMinSamples sets how many requests (completed in the window, or live)
// it takes to judge the quantile (default 10).
func WithMinSamples(n int) SLOOption {
	return func(c *sloConfig) { c.minN = max(n, 1) }
}

// WithPrediction makes the detector count a live request that waits for a
// resource at its predicted latency rather than its age: its age plus the
// time the resource's holders are expected to keep it (for a lock, the
// longest of its holders' expected remaining times; for other kinds, the
// shortest, since any release lets a waiter in). Expected remaining times
// come from package estimate: reported progress, else the class's learned
// durations in d. A request queued behind a scan expected to hold a lock
// for seconds has missed the objective as soon as it queues; with the
// prediction the detector says so then, instead of an objective's length
// later, and the victims that pile up meanwhile are spared. The caller
// feeds d (moirai.WithDurations makes the controller do it).
func WithPrediction(d *estimate.Durations) SLOOption {
	return func(c *sloConfig) { c.predict = d }
}

// NewSLO returns the detector for "the q-quantile of request latency stays
// at or below target". It panics if q is not in (0, 1) or target is not
// positive, as the objective is a programming decision.
func NewSLO(q float64, target time.Duration, opts ...SLOOption) *SLO {
	if !(q > 0 && q < 1) || target <= 0 {
		panic(fmt.Sprintf("detect: invalid objective p%v ≤ %v", q*100, target))
	}
	c := sloConfig{window: time.Second, flat: 0.1, minN: 10}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return &SLO{q: q, target: target, sloConfig: c}
}

var (
	_ policy.Detector = (*SLO)(nil)
	_ policy.Observer = (*SLO)(nil)
)

// Name returns "slo".
func (s *SLO) Name() string { return "slo" }

// Observe adds a snapshot's completions to the window and drops those that
// fell out of it.
func (s *SLO) Observe(snap *snapshot.Snapshot) {
	if snap.Window <= 0 && len(s.entries) == 0 {
		// The first snapshot of a loop carries cumulative completions;
		// they belong to no window.
		s.entries = append(s.entries, sloEntry{at: snap.At})
		return
	}
	// Snapshots closer together than a tenth of the window share an entry,
	// so the window holds about ten entries whatever the loop's tick.
	if n := len(s.entries); n > 1 && snap.At-s.entries[n-2].at < s.window/10 {
		e := &s.entries[n-1]
		e.at = max(e.at, snap.At)
		e.ended += snap.Completed.Ended
		e.hist.Merge(&snap.Completed.Latency)
	} else {
		s.entries = append(s.entries, sloEntry{at: snap.At, ended: snap.Completed.Ended, hist: snap.Completed.Latency})
	}
	s.sum.Merge(&snap.Completed.Latency)
	s.ended += snap.Completed.Ended
	// Keep the entries of the last window (the oldest one marks its start).
	for len(s.entries) > 1 && snap.At-s.entries[1].at >= s.window {
		old := &s.entries[0]
		s.sum.Sub(&old.hist)
		s.ended -= min(s.ended, old.ended)
		s.entries = s.entries[1:]
	}
	if cap(s.entries) > 4*len(s.entries)+64 {
		s.entries = append([]sloEntry(nil), s.entries...)
	}
}

// Detect reports whether the objective is missed while throughput is flat
// or falling, with the numbers in the reason.
func (s *SLO) Detect(snap *snapshot.Snapshot) (bool, string) {
	st := s.Status(snap)
	if !st.Missed {
		return false, ""
	}
	if !st.Flat {
		return false, ""
	}
	return true, st.String()
}

// SLOStatus is what the detector sees in one snapshot.
type SLOStatus struct {
	Quantile float64
	Target   time.Duration
	Samples  int     // completions in the window plus live requests
	Late     float64 // of which above the target
	Missed   bool    // Late/Samples > 1 − q with enough samples
	Older    float64 // completions per second, older half of the window
	Newer    float64 // and newer half
	Flat     bool    // Newer not significantly above Older · (1 + tolerance)
	Window   time.Duration
}

// String describes the status in one line.
func (st SLOStatus) String() string {
	trend := "rising"
	if st.Flat {
		trend = "flat or falling"
	}
	return fmt.Sprintf("%.1f%% of %d requests above %v (objective p%g), throughput %s (%.0f/s → %.0f/s)",
		100*st.Late/max(float64(st.Samples), 1), st.Samples, st.Target, 100*st.Quantile, trend, st.Older, st.Newer)
}

// Status computes the detector's view of snap without changing its state.
func (s *SLO) Status(snap *snapshot.Snapshot) SLOStatus {
	st := SLOStatus{Quantile: s.q, Target: s.target}
	n := float64(s.sum.Count())
	late := s.sum.Above(s.target)
	if s.predict != nil {
		s.remainingHolds(snap)
	}
	for i := range snap.Tasks {
		t := &snap.Tasks[i]
		if !t.HasObjective() || t.Cancelled {
			continue
		}
		n++
		lat := t.Age
		if s.predict != nil {
			lat += s.waitAhead(snap, t)
		}
		if lat > t.ObjectiveOr(s.target) {
			late++
		}
	}
	st.Samples, st.Late = int(n), late
	st.Missed = int(n) >= s.minN && late > (1-s.q)*n
	// Throughput trend over the halves of the window.
	if len(s.entries) >= 2 {
		start, end := s.entries[0].at, s.entries[len(s.entries)-1].at
		mid := start + (end-start)/2
		var older, newer uint64
		var olderSpan, newerSpan time.Duration
		prev := start
		for _, e := range s.entries[1:] {
			if e.at <= mid {
				older += e.ended
				olderSpan += e.at - prev
			} else {
				newer += e.ended
				newerSpan += e.at - prev
			}
			prev = e.at
		}
		st.Window = end - start
		if olderSpan > 0 {
			st.Older = float64(older) / olderSpan.Seconds()
		}
		if newerSpan > 0 {
			st.Newer = float64(newer) / newerSpan.Seconds()
		}
		st.Flat = olderSpan <= 0 || newerSpan <= 0 || !rising(older, newer, olderSpan, newerSpan, s.flat)
	} else {
		st.Flat = true
	}
	return st
}

// remainingHolds computes, per resource, how long its holders are expected
// to keep it.
func (s *SLO) remainingHolds(snap *snapshot.Snapshot) {
	s.remain = s.remain[:0]
	for range snap.Resources {
		s.remain = append(s.remain, -1)
	}
	for i := range snap.Usage {
		u := &snap.Usage[i]
		if u.Held <= 0 || u.Res < 0 || int(u.Res) >= len(snap.Resources) || u.Task < 0 || int(u.Task) >= len(snap.Tasks) {
			continue
		}
		t := &snap.Tasks[u.Task]
		p, _ := estimate.Progress(t, s.predict)
		left := time.Duration(estimate.Future(float64(t.Age), p))
		r := &s.remain[u.Res]
		switch {
		case *r < 0:
			*r = left
		case snap.Resources[u.Res].Kind == resource.KindLock:
			*r = max(*r, left)
		default:
			*r = min(*r, left)
		}
	}
}

// waitAhead returns the longest expected remaining hold of the resources
// live task t waits for now.
func (s *SLO) waitAhead(snap *snapshot.Snapshot, t *snapshot.Task) time.Duration {
	first, n := int(t.First), int(t.N)
	if first < 0 || n <= 0 || first+n > len(snap.Usage) {
		return 0
	}
	var ahead time.Duration
	for _, u := range snap.Usage[first : first+n] {
		if u.Waiting > 0 && u.Res >= 0 && int(u.Res) < len(s.remain) {
			ahead = max(ahead, s.remain[u.Res])
		}
	}
	return ahead
}

// rising reports whether the newer half's completion rate is above the
// older half's by more than the tolerance and by more than three standard
// deviations of the difference of two Poisson rates: over half a second
// of a few hundred requests per second, counts differ by a tenth by chance
// alone, and a detector that took that for rising load would miss the
// onset of resource overload.
func rising(older, newer uint64, olderSpan, newerSpan time.Duration, tol float64) bool {
	so, sn := olderSpan.Seconds(), newerSpan.Seconds()
	ro, rn := float64(older)/so, float64(newer)/sn
	if rn <= ro*(1+tol) {
		return false
	}
	sd := math.Sqrt(float64(older)/(so*so) + float64(newer)/(sn*sn))
	return rn-ro > 3*sd
}

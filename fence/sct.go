package fence

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Sample is one interval's observation of a path: its mean concurrency
// (requests running, averaged over the interval), its throughput
// (requests completed per second), its mean response time, and whether
// requests of the path waited for a permit during the interval (the
// demand was above the reservation).
type Sample struct {
	Concurrency  float64
	Throughput   float64
	ResponseTime time.Duration
	Saturated    bool
}

// SCT is the estimator of the scatter-concurrency-throughput model: from
// a window of a path's samples it finds Q_lower, the smallest
// concurrency at which the path reaches its peak throughput, and the
// permits to reserve for it. Its fields are its parameters; the zero
// value uses the defaults.
//
// # The estimator
//
// Samples are binned by their concurrency rounded to an integer (samples
// below 0.5, an idle path, are ignored). A bin speaks once it holds
// MinSamples samples; its throughput is their interquartile mean (the
// mean of the middle half), which a few
// samples taken during a stall of the downstream or a burst of arrivals
// do not move. The peak X* is the largest bin throughput, and Q_lower
// the smallest bin k whose throughput is within min(Tolerance, 1/(2k))
// of X*.
//
// The permits follow from where the evidence lies:
//
//   - If the highest bin that speaks is above Q_lower, the throughput has
//     been seen to level off: the permits become Q_lower + Headroom, but
//     only when that is above the current reservation or below it by
//     more than Headroom (a dead band of one permit, so that noise does
//     not alternate the reservation between two neighbouring values). The
//     headroom keeps one concurrency level above the knee in sight, so
//     the plateau stays observed after the reservation shrinks.
//   - If the throughput still rises at the highest bin, that bin is at
//     the reservation, and the path's requests had to wait (the demand is
//     above it), the reservation may be too small: it grows by a quarter
//     (at least one permit), to see further up the curve.
//   - If the level just below Q_lower does not speak while requests
//     wait (only one level does, the throughput is flat down to the
//     lowest level known, or a gap hides where it rises), the knee may
//     lie there: the reservation becomes that level for an evaluation, a
//     probe, and the rules apply again with it known. This rule comes
//     first: Q_lower is only trusted once the level below it has been
//     seen to fall short of the peak. A path held at its reservation
//     visits no other level, so the levels below are forgotten after a
//     while (see [WithWindow]) and probed again: a reservation that noise
//     pushed up comes back down, at the price of a short probe every half
//     minute.
//
// Trimmed means per integer bin rather than a fitted curve: the SCT papers
// (ConScale, PathFence) leave the statistics open; a fit assumes a
// shape (linear then flat) that millibottlenecks and queueing distort,
// while per-level trimmed means need no shape, are robust to the outliers
// stalls produce, and are cheap enough to recompute every evaluation.
type SCT struct {
	// MinSamples is how many samples a concurrency level needs before
	// its throughput counts (default 8).
	MinSamples int
	// Tolerance is the largest fraction of the peak throughput a level
	// may fall short of and still count as reaching it (default 0.1). A
	// level k may fall short by at most half of one request's share,
	// 1/(2k), so that a throughput still rising by a request's worth per
	// level, however high the level, counts as rising.
	Tolerance float64
	// Headroom is the permits kept above Q_lower (default 1; negative
	// for none).
	Headroom int
}

func (s SCT) withDefaults() SCT {
	if s.MinSamples < 1 {
		s.MinSamples = 8
	}
	if !(s.Tolerance > 0 && s.Tolerance < 1) {
		s.Tolerance = 0.1
	}
	if s.Headroom < 0 {
		s.Headroom = 0
	} else if s.Headroom == 0 {
		s.Headroom = 1
	}
	return s
}

// Estimate is the outcome of one evaluation of the model.
type Estimate struct {
	// Permits is the reservation the model asks for (equal to the
	// current one when it has no evidence to change it).
	Permits int
	// QLower is the smallest concurrency reaching the peak throughput
	// among the levels that speak, and Peak that throughput; both 0 when
	// no level has enough samples.
	QLower int
	Peak   float64
	// Top is the highest concurrency level with enough samples.
	Top int
	// Reason says why the permits are what they are.
	Reason string
}

// Estimate evaluates the model over samples for a path holding current
// permits, bounded to [1, maxPermits]. It is a pure function.
func (s SCT) Estimate(samples []Sample, current, maxPermits int) Estimate {
	s = s.withDefaults()
	maxPermits = max(maxPermits, 1)
	current = min(max(current, 1), maxPermits)
	bins := map[int][]float64{}
	saturated := false // requests waited while the path ran at its reservation
	for _, x := range samples {
		if !(x.Concurrency >= 0.5) || math.IsInf(x.Concurrency, 0) || !(x.Throughput >= 0) || math.IsInf(x.Throughput, 0) {
			continue
		}
		k := int(math.Round(x.Concurrency))
		bins[k] = append(bins[k], x.Throughput)
		saturated = saturated || (x.Saturated && k >= current)
	}
	type level struct {
		k int
		x float64
	}
	var levels []level
	for k, xs := range bins {
		if len(xs) >= s.MinSamples {
			levels = append(levels, level{k, midMean(xs)})
		}
	}
	est := Estimate{Permits: current}
	if len(levels) == 0 {
		est.Reason = "no concurrency level has enough samples"
		return est
	}
	slices.SortFunc(levels, func(a, b level) int { return a.k - b.k })
	for _, l := range levels {
		est.Peak = max(est.Peak, l.x)
	}
	est.Top = levels[len(levels)-1].k
	for _, l := range levels {
		if l.x >= (1-min(s.Tolerance, 0.5/float64(l.k)))*est.Peak {
			est.QLower = l.k
			break
		}
	}
	switch {
	case est.Peak == 0:
		est.Reason = "no throughput at any level"
	case saturated && est.QLower > 1 && !slices.ContainsFunc(levels, func(l level) bool { return l.k == est.QLower-1 }):
		// The level below Q_lower is unknown: the throughput may level
		// off there already. Look at it while requests wait.
		est.Permits = est.QLower - 1
		est.Reason = fmt.Sprintf("concurrency %d not measured yet, just below %d, the lowest seen at peak throughput, and requests wait: probe it", est.QLower-1, est.QLower)
	case est.Top > est.QLower:
		target := min(est.QLower+s.Headroom, maxPermits)
		if target < current-s.Headroom || target > current {
			est.Permits = target
			est.Reason = fmt.Sprintf("throughput levels off from concurrency %d (%.0f/s): reserve that plus %d", est.QLower, est.Peak, s.Headroom)
		} else {
			est.Reason = fmt.Sprintf("throughput levels off from concurrency %d: the reservation is within the dead band", est.QLower)
		}
	case est.Top >= current && saturated && est.Top < maxPermits:
		from := max(current, est.Top)
		est.Permits = min(from+max(1, from/4), maxPermits)
		est.Reason = fmt.Sprintf("throughput still rises at concurrency %d and requests wait: explore upwards", est.Top)
	default:
		est.Reason = "throughput rises up to the highest level seen, below the reservation: no evidence"
	}
	return est
}

// midMean is the interquartile mean: the mean of the middle half of xs,
// nearly as precise as the mean on well-behaved samples and, like the
// median, unmoved by the quarter of outliers at either end.
func midMean(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	lo, hi := n/4, n-n/4
	sum := 0.0
	for _, x := range s[lo:hi] {
		sum += x
	}
	return sum / float64(hi-lo)
}

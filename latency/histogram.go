// Package latency provides the fixed-bucket latency histogram that the
// runtime keeps for finished tasks and that snapshots carry to detectors.
//
// A [Histogram] is a plain value: 280 log-linear buckets over microseconds
// (exact below 16 µs, then eight buckets per power of two, so any recorded
// value is within 12.5 % of its bucket's bounds) reaching about 19 hours.
// Values are mergeable and subtractable, which is what a sliding window of
// per-tick snapshots needs: the histogram of a window is the difference of
// two cumulative histograms. It is not safe for concurrent use; the
// registry guards its histograms with its shard locks.
package latency

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits    = 3
	subCount   = 1 << subBits
	linearMax  = 2 * subCount // values below this (µs) get a bucket each
	maxExp     = 36           // 2^36 µs ≈ 19 h
	numBuckets = linearMax + (maxExp-subBits)*subCount
)

// Histogram counts durations in fixed buckets. The zero value is empty and
// ready to use.
type Histogram struct {
	buckets [numBuckets]uint64
	count   uint64
	sum     int64 // nanoseconds
}

// bucketOf returns the bucket index of d.
func bucketOf(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	v := uint64(d / time.Microsecond)
	if v < linearMax {
		return int(v)
	}
	e := bits.Len64(v) - 1 // ≥ subBits+1
	if e >= maxExp+1 {
		return numBuckets - 1
	}
	m := (v >> (e - subBits)) & (subCount - 1)
	i := linearMax + (e-subBits-1)*subCount + int(m)
	if i >= numBuckets {
		return numBuckets - 1
	}
	return i
}

// bounds returns the lower and upper bound (exclusive) of bucket i.
func bounds(i int) (lo, hi time.Duration) {
	if i < linearMax {
		return time.Duration(i) * time.Microsecond, time.Duration(i+1) * time.Microsecond
	}
	j := i - linearMax
	e := j/subCount + subBits + 1
	m := uint64(j % subCount)
	base := uint64(1) << e
	step := base >> subBits
	l := base + m*step
	return time.Duration(l) * time.Microsecond, time.Duration(l+step) * time.Microsecond
}

// Record adds one observation.
func (h *Histogram) Record(d time.Duration) {
	h.buckets[bucketOf(d)]++
	h.count++
	h.sum += int64(d)
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count }

// Mean returns the mean observation, 0 if there is none.
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / int64(h.count))
}

// Quantile returns an estimate of the q-quantile (0 ≤ q ≤ 1): the upper
// bound of the bucket holding it, so the estimate errs high by at most one
// bucket's width. It returns 0 for an empty histogram; q is clamped.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	if math.IsNaN(q) || q < 0 {
		q = 0
	}
	if q > 1 {
		q = 1
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.buckets {
		seen += c
		if seen >= rank {
			_, hi := bounds(i)
			return hi
		}
	}
	_, hi := bounds(numBuckets - 1)
	return hi
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.buckets {
		h.buckets[i] += c
	}
	h.count += o.count
	h.sum += o.sum
}

// Sub removes from h the observations of o, which must be an earlier state
// of the same cumulative histogram. Buckets that would go negative are set
// to zero.
func (h *Histogram) Sub(o *Histogram) {
	var n uint64
	for i, c := range o.buckets {
		if h.buckets[i] >= c {
			h.buckets[i] -= c
		} else {
			h.buckets[i] = 0
		}
		n += h.buckets[i]
	}
	h.count = n
	h.sum -= o.sum
	if h.sum < 0 || n == 0 {
		h.sum = 0
	}
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Above returns an estimate of the number of observations greater than d:
// every observation of the buckets above d's, and of d's own bucket the
// share of its width above d (observations are taken as spread evenly).
func (h *Histogram) Above(d time.Duration) float64 {
	if h.count == 0 {
		return 0
	}
	b := bucketOf(d)
	lo, hi := bounds(b)
	n := 0.0
	if c := h.buckets[b]; c > 0 && hi > lo && d < hi {
		n = float64(c) * float64(hi-max(d, lo)) / float64(hi-lo)
	}
	for _, c := range h.buckets[b+1:] {
		n += float64(c)
	}
	return n
}

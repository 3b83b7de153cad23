package baseline

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults of [NewSRE], from the Google SRE book ("Handling Overload",
// client-side throttling).
const (
	DefaultSREK      = 2.0
	DefaultSREWindow = 2 * time.Minute
)

const sreBuckets = 8

// SRE is client-side adaptive throttling as described in the Google SRE
// book: a client keeps, over a sliding window, how many requests it sent
// and how many the backend accepted, and rejects locally with probability
// max(0, (requests − K·accepts) / (requests + 1)). It is a client-side
// mechanism: call [SRE.Allow] before sending and [SRE.Record] with the
// outcome.
type SRE struct {
	k      float64
	bucket time.Duration
	mu     sync.Mutex
	reqs   [sreBuckets]float64
	accs   [sreBuckets]float64
	cur    int64 // index of the current bucket (now / bucket)
}

// NewSRE returns an SRE throttle with multiplier k over window; values that
// are not positive leave the defaults (K = 2, 2 minutes).
func NewSRE(k float64, window time.Duration) *SRE {
	if k <= 0 {
		k = DefaultSREK
	}
	if window <= 0 {
		window = DefaultSREWindow
	}
	return &SRE{k: k, bucket: window / sreBuckets}
}

// Name returns "sre".
func (s *SRE) Name() string { return "sre" }

func (s *SRE) roll(now time.Duration) int {
	b := int64(now / s.bucket)
	if b-s.cur >= sreBuckets {
		s.reqs, s.accs = [sreBuckets]float64{}, [sreBuckets]float64{}
	} else {
		for i := s.cur + 1; i <= b; i++ {
			s.reqs[i%sreBuckets], s.accs[i%sreBuckets] = 0, 0
		}
	}
	if b > s.cur {
		s.cur = b
	}
	return int(s.cur % sreBuckets)
}

// RejectProbability returns the current local rejection probability.
func (s *SRE) RejectProbability(now time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(now)
	var r, a float64
	for i := range s.reqs {
		r += s.reqs[i]
		a += s.accs[i]
	}
	return max(0, (r-s.k*a)/(r+1))
}

// Allow reports whether the client may send a request at now; a request
// it refuses still counts as a request, as in the book.
func (s *SRE) Allow(now time.Duration) bool {
	p := s.RejectProbability(now)
	if p > 0 && rand.Float64() < p {
		s.mu.Lock()
		s.reqs[s.roll(now)]++
		s.mu.Unlock()
		return false
	}
	return true
}

// Record reports the outcome of a request sent at now: accepted is false
// when the backend rejected it for overload.
func (s *SRE) Record(now time.Duration, accepted bool) {
	s.mu.Lock()
	i := s.roll(now)
	s.reqs[i]++
	if accepted {
		s.accs[i]++
	}
	s.mu.Unlock()
}

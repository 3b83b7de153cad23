package estimate

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// Durations learns, per task class, the distribution of the durations of
// the tasks that finish, from the snapshots it observes: a task seen in
// one snapshot and absent from the next has finished, after about its last
// age plus half the window. Cancelled tasks are left out (their duration
// says nothing about the class), and so are tasks shorter than one loop
// tick, which no snapshot sees; the estimate conditions on a task's age,
// so those never matter for a task old enough to be a candidate.
//
// Each class keeps a log-bucketed histogram (four buckets per power of
// two, from 1 µs to about 19 h) whose counts are halved once they pass a
// threshold, so the estimate follows a class whose work changes. At most
// a bounded number of classes is kept; tasks of further classes are not
// learned.
//
// A Durations is not safe for concurrent use. The zero value is not
// usable; call [NewDurations].
type Durations struct {
	classes    map[string]*classHist
	maxClasses int
	dropped    int64 // durations not learned: maxClasses classes were kept
	seen       map[uint64]seenTask
	gen        uint64
	// blind is the age below which the learned durations say nothing: a
	// task shorter than the window between two snapshots may never be
	// seen, so the samples under it are missing. Twice the last window.
	blind time.Duration
}

type seenTask struct {
	class string
	age   time.Duration
	gen   uint64
	skip  bool // cancelled: not a sample
}

const (
	bucketsPerOctave = 4
	numDurBuckets    = 36 * bucketsPerOctave // 1 µs … 2^36 µs
	halveAt          = 4096
)

type classHist struct {
	counts [numDurBuckets]float64
	total  float64
}

// NewDurations returns a learner that keeps at most maxClasses classes
// (1024 if maxClasses < 1).
func NewDurations(maxClasses int) *Durations {
	if maxClasses < 1 {
		maxClasses = 1024
	}
	return &Durations{classes: map[string]*classHist{}, maxClasses: maxClasses, seen: map[uint64]seenTask{}}
}

func durBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if !(us >= 1) {
		return 0
	}
	i := int(math.Log2(us) * bucketsPerOctave)
	return min(max(i, 0), numDurBuckets-1)
}

// bucketMid returns a representative duration of bucket i (its geometric
// middle).
func bucketMid(i int) time.Duration {
	return time.Duration(math.Exp2((float64(i)+0.5)/bucketsPerOctave) * float64(time.Microsecond))
}

// Record adds one finished task of class with duration d. Non-positive
// durations are ignored.
func (d *Durations) Record(class string, dur time.Duration) {
	if dur <= 0 {
		return
	}
	h := d.classes[class]
	if h == nil {
		if len(d.classes) >= d.maxClasses {
			d.dropped++
			return
		}
		h = new(classHist)
		d.classes[class] = h
	}
	h.counts[durBucket(dur)]++
	h.total++
	if h.total >= halveAt {
		h.total = 0
		for i := range h.counts {
			h.counts[i] /= 2
			h.total += h.counts[i]
		}
	}
}

// Dropped returns how many durations were not learned because their
// class was new once the learner kept its maximum of classes.
func (d *Durations) Dropped() int64 { return d.dropped }

// Observe learns from a snapshot: the tasks of the previous observed
// snapshot that are absent from s finished. Call it with every snapshot of
// a loop, in order.
func (d *Durations) Observe(s *snapshot.Snapshot) {
	d.gen++
	for i := range s.Tasks {
		t := &s.Tasks[i]
		d.seen[t.ID] = seenTask{class: t.Class, age: t.Age, gen: d.gen, skip: t.Cancelled}
	}
	half := max(s.Window/2, 0)
	d.blind = 2 * max(s.Window, 0)
	for id, st := range d.seen {
		if st.gen == d.gen {
			continue
		}
		delete(d.seen, id)
		if !st.skip {
			d.Record(st.class, st.age+half)
		}
	}
}

// Samples returns the (decayed) number of durations learned for class.
func (d *Durations) Samples(class string) float64 {
	if h := d.classes[class]; h != nil {
		return h.total
	}
	return 0
}

// ExpectedTotal returns E[D | D > age] for class: the expected total
// duration of a task of the class that has run for age. It reports false
// when the class has no learned duration longer than age, and when age is
// below twice the window of the snapshots observed: tasks that short may
// finish between two snapshots unseen, so the learned durations under it
// are biased towards the long ones.
func (d *Durations) ExpectedTotal(class string, age time.Duration) (time.Duration, bool) {
	if age < d.blind {
		return 0, false
	}
	return d.expected(class, age)
}

// expected is E[D | D > age] over the learned durations of class.
func (d *Durations) expected(class string, age time.Duration) (time.Duration, bool) {
	h := d.classes[class]
	if h == nil {
		return 0, false
	}
	age = max(age, 0)
	var n, sum float64
	for i := durBucket(age); i < numDurBuckets; i++ {
		c := h.counts[i]
		if c <= 0 {
			continue
		}
		m := bucketMid(i)
		if m <= age {
			// The bucket holding age: its durations are about age; count
			// them as just past it.
			m = age + 1
		}
		n += c
		sum += c * float64(m)
	}
	if n <= 0 {
		return 0, false
	}
	return time.Duration(sum / n), true
}

// Mean returns the mean learned duration of class (of the tasks seen by
// at least one snapshot), and false if there is none.
func (d *Durations) Mean(class string) (time.Duration, bool) {
	return d.expected(class, 0)
}

// Skip leaves task id out of the durations learned when it ends: a task
// chosen for cancellation did not run its class's whole course, whether or
// not a later snapshot shows it cancelled. A task not seen yet is ignored.
func (d *Durations) Skip(id uint64) {
	if st, ok := d.seen[id]; ok {
		st.skip = true
		d.seen[id] = st
	}
}

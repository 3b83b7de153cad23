package penalty

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// capFor returns the cap of a penalty of a task of the class for deferring
// others on resource ri. WithMaxPenalty's cap, if set, is the cap. On a
// lock or a queue, once the class has been followed for [minSamples]
// snapshots, it is the class's slowdown budget (see budget). Otherwise it
// is the stream rule: [DefaultMaxPenalty], or, if longer, how long the
// class's tasks are held back in front of the resource beyond waiting for
// the hold in progress. That is, over the class's tasks that ended, the
// penalties they served plus their waits for the resource, less half of
// one hold (for a queue of capacity c, 1/2c of one): a penalty that long
// moves a stream's queueing behind itself from the resource's queue,
// where the victims wait behind it, into the penalty, where they do not.
// Never above task.MaxPenalty.
func (p *Policy) capFor(s *snapshot.Snapshot, class string, ri int32) time.Duration {
	if p.fixed || class == "" || ri < 0 || int(ri) >= len(s.Resources) {
		return p.max
	}
	r := &s.Resources[ri]
	k := holdKey{class, r.ID}
	// Only a stream that can have a budget is followed.
	var st *stream
	if p.slowdown > 1 && (r.Kind == resource.KindLock || r.Kind == resource.KindQueue) {
		st = p.streams[k]
		if st == nil && len(p.streams) < maxStreams {
			st = &stream{}
			p.streams[k] = st
		}
	}
	d, ok := p.done[k]
	if !ok {
		return p.max
	}
	c := capacityOf(r)
	held := d.served + d.wait - d.hold/time.Duration(2*c)
	queue := max(p.max, min(held, task.MaxPenalty))
	if st == nil || st.samples < minSamples {
		return queue
	}
	b := p.budget(st, d, c)
	if st.shared {
		// Tasks of the class hold the resource together (readers of a
		// shared lock): the queue model behind the budget does not
		// hold, so the budget only cuts the stream rule's cap.
		b = min(b, queue)
	}
	if st.cap == 0 || math.Abs(float64(b-st.cap)) > deadband*float64(st.cap) {
		st.cap = b
	}
	return st.cap
}

// capacityOf returns how many tasks can hold the resource at once, as the
// policy's queue model counts them: a queue's capacity, 1 for the rest.
func capacityOf(r *snapshot.Resource) int64 {
	if r.Kind == resource.KindQueue && r.Capacity > 1 {
		return r.Capacity
	}
	return 1
}

// budget returns the cap that keeps a stream's requests within the
// policy's slowdown factor β of their uncontrolled latency L0. Each
// request holds the resource for h and waits for it for w (moving
// averages over the class's tasks that ended, as they are under the
// penalties now), and a share f of them serves a penalty, so a cap of
// (β·L0 − h − w)/f keeps a request at β·L0 on average. L0 is estimated
// from what penalties do not change: n requests of the class live at once
// (a client's connections sending back to back keep n fixed), each
// holding for h, on c slots, of which the other classes hold a share ρ,
// queue for n·h/(c·(1−ρ)); a stream that does not queue behind itself
// takes h+w. f is taken as at least ½, so that the cap at most doubles
// what the average penalty may be. The result is between the policy's
// minimum penalty and task.MaxPenalty.
func (p *Policy) budget(st *stream, d spent, c int64) time.Duration {
	h, w := float64(d.hold), float64(d.wait)
	free := max(1-st.rho, minFree)
	l0 := max(h+w, st.n*h/(float64(c)*free))
	b := (p.slowdown*l0 - h - w) / max(d.penalized, 0.5)
	if math.IsNaN(b) {
		return p.max
	}
	return time.Duration(min(max(b, float64(p.min)), float64(task.MaxPenalty)))
}

// stream is what the policy follows of a class penalized for deferring
// others on one resource, to set its budget: moving averages, over the
// snapshots where the class has live tasks, of how many it has and of the
// share of the resource the other classes hold.
type stream struct {
	n, rho  float64
	samples int
	idle    int           // snapshots in a row without a live task
	shared  bool          // two tasks of the class seen holding it at once
	cap     time.Duration // the last cap given, 0: none yet
}

// tally is a followed class's holds of its resource in one snapshot.
type tally struct {
	units   int64
	holders int
}

const (
	// minSamples is how many snapshots a stream is followed for before
	// its budget sets its cap.
	minSamples = 8
	// forgetAfter is how many snapshots in a row without a live task of
	// its class a stream is forgotten after.
	forgetAfter = 256
	// maxStreams bounds the streams followed.
	maxStreams = 1024
	// streamSmoothing is the weight of a stream's moving averages: a
	// snapshot counts for 1/streamSmoothing.
	streamSmoothing = 32
	// deadband is the relative change of a stream's budget below which
	// its cap stays as it was, so that the penalties' noise does not
	// move the cap that sets them.
	deadband = 0.2
	// minFree bounds from below the share of a resource left to a stream
	// in its uncontrolled-latency estimate.
	minFree = 0.1
)

// follow folds one snapshot into the followed streams: the live tasks of
// each class and what the class holds of its resource. Streams without a
// live task for forgetAfter snapshots are forgotten.
func (p *Policy) follow(s *snapshot.Snapshot, live map[string]int, held map[holdKey]tally) {
	var index map[task.ResourceID]int
	for k, st := range p.streams {
		n := live[k.class]
		if n == 0 {
			if st.idle++; st.idle >= forgetAfter {
				delete(p.streams, k)
			}
			continue
		}
		st.idle = 0
		if index == nil {
			index = make(map[task.ResourceID]int, len(s.Resources))
			for i := range s.Resources {
				index[s.Resources[i].ID] = i
			}
		}
		ri, ok := index[k.res]
		if !ok {
			continue
		}
		r := &s.Resources[ri]
		h := held[k]
		if h.holders > 1 && r.Kind == resource.KindLock {
			st.shared = true
		}
		rho := float64(r.Held-h.units) / float64(capacityOf(r))
		rho = min(max(rho, 0), 1)
		if st.samples == 0 {
			st.n, st.rho = float64(n), rho
		} else {
			st.n += (float64(n) - st.n) / streamSmoothing
			st.rho += (rho - st.rho) / streamSmoothing
		}
		st.samples++
	}
}

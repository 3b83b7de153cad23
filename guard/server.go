package guard

import (
	"time"

	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// serverContention follows the server's throughput and, while it is lost,
// charges the loss to ServerResource as its delay (see ServerResource).
func (b *Builder) serverContention(snap *snapshot.Snapshot, resIndex map[string]int32, lag time.Duration) {
	if lag > 0 && b.lossSpan < 2*lag {
		// Counters that move in bursts need a longer span; the history
		// so far was averaged over too short a one.
		b.lossSpan = 2 * lag
		b.throughput = detect.NewCollapse(LossFraction, detect.WithSpan(b.lossSpan))
	}
	b.throughput.Observe(snap)
	// A loss while a lock is contended, or within a span after, is the
	// lock's doing: its waiters are the throughput lost, and the
	// statements that run once it is released are its victims catching
	// up, not the server's monopolists.
	exec := estimate.ExecTime(snap)
	for i := range snap.Resources {
		if r := &snap.Resources[i]; r.Kind == resource.KindLock && estimate.Level(r.WindowWait, exec) >= lockExplains {
			b.lockedAt = snap.At
		}
	}
	if !b.throughput.Collapsed() || (b.lockedAt > 0 && snap.At-b.lockedAt < b.lossSpan) {
		b.lossSince, b.loss = -1, 0
		return
	}
	recent, best := b.throughput.Rates()
	b.loss = estimate.Clamp01(1 - recent/best)
	if b.lossSince < 0 {
		b.lossSince = snap.At
	}
	ri, ok := resIndex[ServerResource]
	if !ok {
		return
	}
	r := &snap.Resources[ri]
	delay := time.Duration(b.loss * float64(exec))
	r.WindowWait += delay
	r.Wait += delay
	b.res[ServerResource].wait += delay
	r.Waiters = max(len(snap.Tasks)-b.serverHolders(snap, ri), 0)
}

// serverHolders keeps, among the tasks holding the server resource (index
// ri) in snap, the monopolists, clearing the others' holds, and returns
// how many it kept.
func (b *Builder) serverHolders(snap *snapshot.Snapshot, ri int32) (long int) {
	// Every live task waits for the lost capacity but those that have
	// held the server for a whole span of the lost throughput. Only those
	// hold it: a statement that has run for less than that may be one the
	// loss itself held up (a commit stuck in a checkpoint's fsync), not a
	// cause of it, and is no candidate. And its statement (not only its
	// transaction: a transaction of short statements, one running at
	// every poll, is the normal load) must have run MinRun.
	// And a monopolist holds most of the server's work: its statement's
	// time in the last span must be at least half of every running
	// statement's (every client's UPDATE stuck in a stall of the server's
	// own, seen in an open-loop run of my-ftwrl, has no such share).
	clear(b.shares)
	minRun := b.MinRun
	if minRun <= 0 {
		minRun = b.lossSpan
	}
	var work time.Duration
	ran := make(map[int32]time.Duration)
	for i := range snap.Usage {
		if u := &snap.Usage[i]; u.Res == ri && u.Held > 0 {
			s := b.byTask[snap.Tasks[u.Task].ID]
			var run time.Duration
			if s != nil {
				run = clampSince(snap.Time, s.QueryStart, maxFirst)
				if s.Age > 0 && s.XactStart.IsZero() {
					run = s.Age
				}
			}
			ran[u.Task] = run
			work += min(run, b.lossSpan)
		}
	}
	for i := range snap.Usage {
		u := &snap.Usage[i]
		if u.Res != ri || u.Held <= 0 {
			continue
		}
		run := ran[u.Task]
		share := 0.0
		if work > 0 {
			share = float64(min(run, b.lossSpan)) / float64(work)
		}
		if u.Hold < b.lossSpan || run < minRun || share < 0.5 {
			u.Held = 0
			continue
		}
		long++
		b.shares[snap.Tasks[u.Task].ID] = share
	}
	return long
}

package wait

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

type Log struct {
	mu      sync.Mutex
	cond    *sync.Cond
	flushed int64
	busy    atomic.Bool
	stopc   chan struct{}
}

// WaitFlushed waits on a condition until another goroutine's flush passes
// lsn: a hand-made wait.
func (l *Log) WaitFlushed(lsn int64) {
	l.mu.Lock()
	for l.flushed < lsn { // want `loop in \(\*Log\).WaitFlushed waits \(\(\*sync.Cond\).Wait\) until Log.flushed changes`
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// Acquire spins on an atomic flag, yielding: a hand-made lock.
func (l *Log) Acquire() {
	for !l.busy.CompareAndSwap(false, true) { // want `loop in \(\*Log\).Acquire waits \(runtime.Gosched\) until Log.busy.CompareAndSwap\(\) changes`
		runtime.Gosched()
	}
}

// poll sleeps through a wrapper until the flag is set; the exit is an if
// that breaks.
func (l *Log) Poll(ctx context.Context) {
	for { // want `loop in \(\*Log\).Poll waits \(wait.pause \(time.Sleep\)\) until Log.flushed changes`
		if l.flushed > 0 {
			break
		}
		pause()
	}
}

func pause() { time.Sleep(time.Millisecond) }

// Run is a goroutine's lifetime loop: it works between waits and leaves
// on a stop channel. Not a wait loop.
func (l *Log) Run() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for l.flushed >= 0 {
		select {
		case <-t.C:
		case <-l.stopc:
			return
		}
		l.flush()
	}
}

func (l *Log) flush() { l.flushed++ }

// Retry waits between attempts but its condition is local: not shared.
func Retry() {
	for i := 0; i < 3; i++ {
		time.Sleep(time.Millisecond)
	}
}

// Stop leaves on a channel only: the lifetime idiom, not reported.
func (l *Log) Stop() {
	for {
		select {
		case <-l.stopc:
			return
		case <-time.After(time.Second):
		}
	}
}

package dep

import (
	"context"
	"os"
	"sync"
	"time"
)

// Sleep waits on every path: a wrapper.
func Sleep(ctx context.Context, d time.Duration) error { // want Sleep:`blocking\(must=wait may=wait: a select\)`
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Maybe waits on one branch only.
func Maybe(b bool) { // want Maybe:`blocking\(must=none may=wait: time.Sleep\)`
	if b {
		time.Sleep(time.Millisecond)
	}
}

// Early waits after an error return: the normal path waits.
func Early(err error) error { // want Early:`blocking\(must=wait may=wait: time.Sleep\)`
	if err != nil {
		return err
	}
	time.Sleep(time.Millisecond)
	return nil
}

// Sync does I/O.
func Sync(f *os.File) error { // want Sync:`blocking\(must=io may=io: \(\*os.File\).Sync\)`
	return f.Sync()
}

var mu sync.Mutex

// Locked takes a lock: not exported as a fact (locks stay in their
// package).
func Locked() {
	mu.Lock()
	mu.Unlock()
}

// Pure does nothing that blocks: no fact.
func Pure(a, b int) int { return a + b }

// Wrapper waits through Sleep.
func Wrapper(ctx context.Context) { // want Wrapper:`blocking\(must=wait may=wait: a select\)`
	_ = Sleep(ctx, time.Millisecond)
}

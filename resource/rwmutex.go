package resource

import (
	"context"
	"sync"

	"github.com/moirai-go/moirai/task"
)

// RWMutex is a reader/writer lock that records readers and the writer as
// holders and everyone queued as waiters, per task. Grants are in arrival
// order: a waiting writer holds back readers that arrive after it (as
// sync.RWMutex does, and as a table lock queue does in a database), and a
// run of readers at the head of the queue is admitted together. Waits are
// context-aware.
//
// Unlike sync.RWMutex, RUnlock takes the reader's context, so the release is
// charged to the right task. An RWMutex must be created by [NewRWMutex] and
// must not be copied after first use.
type RWMutex struct {
	res *Resource

	mu      sync.Mutex
	readers int
	writer  bool
	wtask   *task.Task
	q       waitQueue
}

// NewRWMutex returns an unlocked reader/writer lock accounted to r.
func NewRWMutex(r *Resource) *RWMutex { return &RWMutex{res: r} }

// Resource returns the resource the lock is accounted to.
func (m *RWMutex) Resource() *Resource { return m.res }

// RLock locks m for reading by the task in ctx. It waits while a writer
// holds m or waits ahead of it; if ctx is done first it returns
// context.Cause(ctx) and leaves m unchanged.
func (m *RWMutex) RLock(ctx context.Context) error {
	t, err := m.res.enter(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if !m.writer && m.q.Front() == nil {
		m.readers++
		m.mu.Unlock()
		m.res.acquire(t, 1)
		return nil
	}
	return m.wait(ctx, t, false)
}

// RUnlock undoes one RLock by the task in ctx. An RUnlock without a
// matching RLock panics, as it does for sync.RWMutex.
func (m *RWMutex) RUnlock(ctx context.Context) {
	t := m.res.taskOf(ctx)
	m.mu.Lock()
	if m.readers <= 0 {
		m.mu.Unlock()
		panic("moirai: RUnlock of unlocked RWMutex")
	}
	m.readers--
	if m.readers == 0 {
		m.grantLocked()
	}
	m.mu.Unlock()
	_ = m.res.release(t, 1)
}

// Lock locks m for writing by the task in ctx. It waits while m is held or
// others wait ahead of it; if ctx is done first it returns
// context.Cause(ctx) and leaves m unchanged.
func (m *RWMutex) Lock(ctx context.Context) error {
	t, err := m.res.enter(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if !m.writer && m.readers == 0 && m.q.Front() == nil {
		m.writer, m.wtask = true, t
		m.mu.Unlock()
		m.res.acquire(t, 1)
		return nil
	}
	return m.wait(ctx, t, true)
}

// Unlock undoes Lock, charging the hold to the task that locked. Unlocking
// an RWMutex not locked for writing panics, as it does for sync.RWMutex.
func (m *RWMutex) Unlock() {
	m.mu.Lock()
	if !m.writer {
		m.mu.Unlock()
		panic("moirai: Unlock of unlocked RWMutex")
	}
	t := m.wtask
	m.writer, m.wtask = false, nil
	m.grantLocked()
	m.mu.Unlock()
	_ = m.res.release(t, 1)
}

// wait queues the caller (m.mu held on entry, released on return).
func (m *RWMutex) wait(ctx context.Context, t *task.Task, write bool) error {
	w := getWaiter(t)
	w.write = write
	m.q.PushBack(w)
	m.mu.Unlock()
	m.res.waitBegin(t)
	select {
	case <-w.ch:
		m.res.waitEnd(t)
		m.res.acquire(t, 1)
		if m.res.armed() {
			m.mu.Lock()
			waiting := m.q.Front() != nil
			m.mu.Unlock()
			if waiting {
				m.res.poke()
			}
		}
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	if w.Queued() {
		wasHead := m.q.Front() == w
		m.q.Remove(w)
		if wasHead {
			m.grantLocked() // readers queued behind a writer may go now
		}
		m.mu.Unlock()
	} else {
		// Granted meanwhile: give it back.
		<-w.ch
		if write {
			m.writer, m.wtask = false, nil
		} else {
			m.readers--
		}
		m.grantLocked()
		m.mu.Unlock()
	}
	m.res.waitEnd(t)
	return causeOf(ctx, t)
}

// grantLocked admits waiters from the head of the queue: one writer when m
// is free, or every reader up to the next writer while no writer holds m.
func (m *RWMutex) grantLocked() {
	for w := m.q.Front(); w != nil; w = m.q.Front() {
		if w.write {
			if m.writer || m.readers > 0 {
				return
			}
			m.writer, m.wtask = true, w.t
		} else {
			if m.writer {
				return
			}
			m.readers++
		}
		m.q.Remove(w)
		w.granted = true
		w.ch <- struct{}{}
		if w.write {
			return
		}
	}
}

// Readers returns how many readers hold m now.
func (m *RWMutex) Readers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readers
}

// Waiting returns how many lockers wait for m now.
func (m *RWMutex) Waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.q.Len()
}

package bufferpool

import (
	"container/list"
	"sync"
)

// lru is a pool (a buffer pool, a query cache) of entries of some size in
// units, evicted least recently used first. Its mutex guards only its
// bookkeeping, never held across I/O.
type lru struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	order    list.List // of *lruEntry, most recently used first
	index    map[uint64]*list.Element
}

type lruEntry struct {
	key  uint64
	size int64
}

func newLRU(capacity int64) *lru {
	return &lru{capacity: capacity, index: make(map[uint64]*list.Element)}
}

// get reports whether key is in the pool, and makes it most recently used.
func (p *lru) get(key uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.index[key]
	if ok {
		p.order.MoveToFront(e)
	}
	return ok
}

// put inserts key (of size units), evicting least recently used entries
// until it fits.
func (p *lru) put(key uint64, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.index[key]; ok {
		p.order.MoveToFront(e)
		return
	}
	for p.used+size > p.capacity && p.order.Len() > 0 {
		back := p.order.Back()
		e := back.Value.(*lruEntry)
		p.order.Remove(back)
		delete(p.index, e.key)
		p.used -= e.size
	}
	p.index[key] = p.order.PushFront(&lruEntry{key: key, size: size})
	p.used += size
}

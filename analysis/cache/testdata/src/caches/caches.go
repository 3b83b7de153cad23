package caches

import (
	"container/list"
	"context"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

var results, _ = lru.New[string, []byte](1024)

// Lookup uses a library LRU on a request path.
func Lookup(ctx context.Context, q string) []byte {
	if v, ok := results.Get(q); ok { // want `cache results \(github.com/hashicorp/golang-lru/v2.Cache, a package-level variable\) is used on a request path in Lookup: account for its memory with a \*moirai.Memory`
		return v
	}
	v := []byte(q)
	results.Add(q, v)
	return v
}

// pages is a hand-made LRU: map index, list order, eviction in put.
type pages struct { // want `type pages looks like a cache \(map index, list order, evicts in \(\*pages\).put\) used on a request path`
	mu    sync.Mutex
	index map[uint64]*list.Element
	order list.List
	cap   int
}

func (p *pages) put(k uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.order.Len() >= p.cap {
		back := p.order.Back()
		delete(p.index, back.Value.(uint64))
		p.order.Remove(back)
	}
	p.index[k] = p.order.PushFront(k)
}

var pool = &pages{index: map[uint64]*list.Element{}, cap: 16}

// Read goes through the pool.
func Read(ctx context.Context, k uint64) { pool.put(k) }

// registry has a map and a size but never evicts: not a cache.
type registry struct {
	m    map[string]int
	size int
}

func (r *registry) Add(k string) { r.m[k] = len(r.m); r.size++ }

// sync.Pool is not reported: Get never waits.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

func Buf(ctx context.Context) *[]byte { return bufs.Get().(*[]byte) }

package locks

import (
	"context"
	"os"
	"sync"
	"time"
)

// Store is long-lived: its fields are shared by every request.
type Store struct {
	mu    sync.Mutex
	index sync.RWMutex
	stats sync.Mutex
	rows  map[string][]byte
	n     int
	f     *os.File
}

// Put holds mu across a file write: reported.
func (s *Store) Put(ctx context.Context, k string, v []byte) error {
	s.mu.Lock() // want `sync.Mutex Store.mu \(a struct field\) is locked on a request path in \(\*Store\).Put and held across I/O \(\(\*os.File\).Write\)`
	defer s.mu.Unlock()
	s.rows[k] = v
	_, err := s.f.Write(v)
	return err
}

// Scan holds the index's read lock across a loop over every row: reported.
func (s *Store) Scan(ctx context.Context) int {
	s.index.RLock() // want `sync.RWMutex Store.index \(a struct field\) is locked on a request path in \(\*Store\).Scan and held across a loop: make it a \*moirai.RWMutex \(ctl.RWMutex\("Store.index"\); Lock\(ctx\)`
	defer s.index.RUnlock()
	total := 0
	for _, r := range s.rows {
		total += len(r)
	}
	return total
}

// Set holds the index for a map write only.
func (s *Store) Set(k string, v []byte) {
	s.index.Lock()
	s.rows[k] = v
	for i := 0; i < 3; i++ { // a loop of constant trip count
		s.n++
	}
	s.index.Unlock()
}

// Count is short: a counter under a lock is not worth a tracked lock.
func (s *Store) Count() int {
	s.stats.Lock()
	defer s.stats.Unlock()
	s.n++
	return s.n
}

var global sync.Mutex

// Handler takes a package-level lock and sleeps under it: reported.
func Handler() {
	global.Lock() // want `sync.Mutex global \(a package-level variable\) is locked on a request path in Handler and held across a wait \(time.Sleep\)`
	time.Sleep(time.Millisecond)
	global.Unlock()
}

// local is never shared: not reported, whatever it holds the lock across.
func Local() {
	var mu sync.Mutex
	mu.Lock()
	time.Sleep(time.Millisecond)
	mu.Unlock()
}

// Begin hands its lock to the caller, as a transaction does: reported.
func (s *Store) Begin() *Store {
	s.stats.Lock() // want `sync.Mutex Store.stats .* held across the function's return \(it is released elsewhere\)`
	return s
}

// Commit releases what Begin took.
func (s *Store) Commit() { s.stats.Unlock() }

// Embedded locks are named by their field.
type cache struct {
	sync.Mutex
	m map[int]int
}

var c = &cache{m: map[int]int{}}

// Each calls fn under the lock: a callback of unknown cost.
func Each(fn func(k, v int)) {
	c.Lock() // want `sync.Mutex cache.Mutex \(a struct field\) is locked on a request path in Each and held across a call of the function value fn`
	defer c.Unlock()
	fn(1, c.m[1])
}

// Build returns handlers that share a captured lock and a *sync.Mutex
// parameter.
func build() (func(ctx context.Context) error, func(ctx context.Context, mu *sync.Mutex)) {
	var table sync.Mutex
	insert := func(ctx context.Context) error {
		table.Lock() // want `sync.Mutex table \(a variable captured by a function literal\) is locked on a request path in a function literal in build and held across a wait \(time.Sleep\)`
		defer table.Unlock()
		time.Sleep(time.Millisecond)
		return nil
	}
	with := func(ctx context.Context, mu *sync.Mutex) {
		mu.Lock() // want `sync.Mutex mu \(a pointer parameter\) is locked on a request path in a function literal in build and held across a wait \(time.Sleep\)`
		time.Sleep(time.Millisecond)
		mu.Unlock()
	}
	return insert, with
}

var _ = build

// unexported and never called from a request path: not reported.
func unused(s *Store) {
	s.mu.Lock()
	time.Sleep(time.Millisecond)
	s.mu.Unlock()
}

package resource

import "context"

// Memory accounts for a pool or a cache that tasks share and evict each
// other from: a buffer pool, a query cache, pooled buffers, the heap. It
// allocates nothing itself; the application tells it what happens:
//
//   - Use: the task now uses n more units (pages pinned or touched, bytes
//     held, entries filled);
//   - Free: the task stops using n units;
//   - Evict: the task's work pushed n units that others used out of the
//     pool;
//   - MissBegin/MissEnd: the task waits to bring back what was evicted (a
//     page read after a miss), which is the wait contention on memory is
//     measured by.
//
// All methods are safe for concurrent use and never block.
type Memory struct {
	res *Resource
}

// NewMemory returns accounting for a pool of capacity units (0: unknown)
// on r.
func NewMemory(r *Resource) *Memory { return &Memory{res: r} }

// Resource returns the resource the pool is accounted to.
func (m *Memory) Resource() *Resource { return m.res }

// Use records that the task in ctx uses n more units. A task may use at
// most task.MaxUnits units of one pool at a time: past that Use returns an
// error and changes nothing.
func (m *Memory) Use(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if err := m.res.acquire(m.res.taskOf(ctx), n); err != nil {
		return err
	}
	m.res.resident.Add(n)
	return nil
}

// Free records that the task in ctx stopped using n units. Freeing more
// than the task uses returns an error and changes nothing.
func (m *Memory) Free(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	t := m.res.taskOf(ctx)
	if err := m.res.release(t, n); err != nil {
		return err
	}
	m.res.resident.Add(-n)
	return nil
}

// Evict records that the task in ctx evicted n units others used.
func (m *Memory) Evict(ctx context.Context, n int64) {
	m.res.evicted(m.res.taskOf(ctx), n)
}

// MissBegin records that the task in ctx starts waiting for evicted data to
// come back. Every MissBegin must be followed by one MissEnd.
func (m *Memory) MissBegin(ctx context.Context) { m.res.waitBegin(m.res.taskOf(ctx)) }

// MissEnd records that the wait begun by MissBegin is over.
func (m *Memory) MissEnd(ctx context.Context) { m.res.waitEnd(m.res.taskOf(ctx)) }

// InUse returns the units tasks use now.
func (m *Memory) InUse() int64 { return m.res.resident.Load() }

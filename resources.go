package moirai

import (
	"fmt"

	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/resource"
)

// Register creates a raw resource for custom instrumentation with
// [Resource]'s event methods. Names are unique across the controller.
func (c *Controller) Register(name string, kind resource.Kind, capacity int64) (*Resource, error) {
	return c.res.Register(name, kind, capacity)
}

// Resource returns the resource registered under name, or an error that
// wraps resource.ErrUnknown.
func (c *Controller) Resource(name string) (*Resource, error) { return c.res.Lookup(name) }

// mustRegister registers a resource for a constructor that cannot return an
// error. A duplicate or invalid name is a programming error found at
// start-up, as with prometheus.MustRegister and http.Handle.
func (c *Controller) mustRegister(name string, kind resource.Kind, capacity int64) *Resource {
	r, err := c.res.Register(name, kind, capacity)
	if err != nil {
		panic(err)
	}
	return r
}

// Mutex returns a new instrumented mutex on a lock resource called name.
// It panics if name is empty or already registered.
func (c *Controller) Mutex(name string) *Mutex {
	return newMutex(c.mustRegister(name, resource.KindLock, 0), c.clock)
}

// RWMutex returns a new instrumented reader/writer lock on a lock resource
// called name. It panics if name is empty or already registered.
func (c *Controller) RWMutex(name string) *RWMutex {
	return resource.NewRWMutex(c.mustRegister(name, resource.KindLock, 0))
}

// Semaphore returns a new instrumented weighted semaphore of size units on
// a queue resource called name. It panics if name is empty or already
// registered, or if size < 1.
func (c *Controller) Semaphore(name string, size int64) *Semaphore {
	if size < 1 {
		panic(fmt.Sprintf("moirai: semaphore %q of size %d", name, size))
	}
	return newSemaphore(c.mustRegister(name, resource.KindQueue, size), size, c.clock)
}

// Queue returns a new instrumented worker queue of slots slots on a queue
// resource called name; backlog bounds the requests waiting (0: no bound).
// It panics if name is empty or already registered, or if slots < 1.
func (c *Controller) Queue(name string, slots, backlog int64) *Queue {
	if slots < 1 || backlog < 0 {
		panic(fmt.Sprintf("moirai: queue %q of %d slots and backlog %d", name, slots, backlog))
	}
	return newQueue(c.mustRegister(name, resource.KindQueue, slots), slots, backlog, c.clock)
}

// Fence returns a path fence of size workers with the reservations
// given, accounted to a queue resource called name, so that the
// controller's mechanisms see who waits for the fence's workers and who
// holds them (see package fence). Unlike the primitives above it returns
// an error, not a panic, for reservations the fence refuses or a name
// already registered: reservations often come from configuration.
func (c *Controller) Fence(name string, size int, paths []fence.Reservation, opts ...fence.Option) (*fence.Fence, error) {
	// Check the reservations before the name is taken.
	if _, err := fence.New(size, paths, opts...); err != nil {
		return nil, err
	}
	r, err := c.res.Register(name, resource.KindQueue, int64(size))
	if err != nil {
		return nil, err
	}
	return fence.New(size, paths, append(opts, fence.WithResource(r))...)
}

// Memory returns accounting for a pool or cache of capacity units on a
// memory resource called name. It panics if name is empty or already
// registered, or if capacity < 0.
func (c *Controller) Memory(name string, capacity int64) *Memory {
	return resource.NewMemory(c.mustRegister(name, resource.KindMemory, capacity))
}

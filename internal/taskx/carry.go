package taskx

import (
	"sync"
	"sync/atomic"
	"time"
)

// A penalty is served at the noisy task's next safe point. pBox keeps a
// penalty on the noisy pBox, which outlives one activity: a connection's
// next request serves what its last one earned. Here a request is a task
// of its own, so a task that ends with a penalty still pending passes it
// to the next task of its class to begin (the class stands for pBox's
// noisy activity: a report, a bulk import, a client's heavy statement).
// Without this, a noisy stream of requests that each take their resource
// once would earn penalties that no one ever serves.
const (
	// CarryFor is how long a penalty left by an ended task waits for the
	// next task of its class: a class that has not begun a task since
	// then was not a stream.
	CarryFor = time.Second
	// maxCarried bounds the penalties waiting per class.
	maxCarried = 16
	// maxCarriedClasses bounds the classes with penalties waiting (classes
	// come from requests); a penalty of a further class is not carried,
	// and counted (Stats().CarryDropped).
	maxCarriedClasses = 1024
)

// carried is what the ended tasks of one class left to serve.
type carried struct {
	d     time.Duration // the newest length (the policy's latest)
	n     int           // how many tasks may still take it
	until int64         // clock value after which it is forgotten
}

// carrier holds the carried penalties of a registry. Begin reads one
// atomic counter while none waits.
type carrier struct {
	waiting atomic.Int32 // classes with penalties waiting
	mu      sync.Mutex
	byClass map[string]carried
	// expires is the earliest clock value at which a class's penalties
	// are forgotten: take sweeps the map only once it has passed.
	expires int64
	dropped int64 // penalties not carried: maxCarriedClasses classes waited
}

// leave records a penalty that a task of the class ended without serving.
func (c *carrier) leave(class string, d time.Duration, now int64) {
	if class == "" || d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byClass == nil {
		c.byClass = map[string]carried{}
	}
	k, ok := c.byClass[class]
	if !ok || k.until < now {
		k = carried{}
	}
	if !ok {
		if len(c.byClass) >= maxCarriedClasses {
			c.dropped++
			return
		}
		c.waiting.Add(1)
	}
	k.d = d
	k.n = min(k.n+1, maxCarried)
	k.until = now + int64(CarryFor)
	c.byClass[class] = k
	if c.waiting.Load() == 1 || k.until < c.expires {
		c.expires = k.until
	}
}

// take returns the penalty a task of the class beginning now must serve,
// 0 if none waits.
func (c *carrier) take(class string, now int64) time.Duration {
	if c.waiting.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now > c.expires {
		c.sweep(now)
	}
	k, ok := c.byClass[class]
	if !ok {
		return 0
	}
	k.n--
	if k.n <= 0 {
		delete(c.byClass, class)
		c.waiting.Add(-1)
	} else {
		c.byClass[class] = k
	}
	return k.d
}

// leavePenalty leaves a penalty of length d to the next task of the class
// to begin, as a task of the class that ended with it pending would: for
// a penalty decided on a task that ended before it could be given.
func (r *Registry) leavePenalty(class string, d time.Duration) {
	r.carry.leave(class, min(d, MaxPenalty), r.clock.Now())
}

// sweep forgets the expired classes, so that waiting drops back to 0
// when none is left, and notes when the next one expires.
func (c *carrier) sweep(now int64) {
	c.expires = 1<<63 - 1
	for cl, k := range c.byClass {
		if k.until < now {
			delete(c.byClass, cl)
			c.waiting.Add(-1)
		} else {
			c.expires = min(c.expires, k.until)
		}
	}
}

// carriedFor returns how many penalties wait for a task of the class to
// begin (for tests and the debug page).
func (r *Registry) carriedFor(class string) int {
	r.carry.mu.Lock()
	defer r.carry.mu.Unlock()
	k, ok := r.carry.byClass[class]
	if !ok || k.until < r.clock.Now() {
		return 0
	}
	return k.n
}

package dbsuite

import (
	"context"
	"sync"
)

// culpritLog is what a run records of its culprit: the server sessions it
// ran on (PostgreSQL pids, MariaDB connection ids), to tell a controller's
// cancel of the culprit from one of a victim, and how many of its
// statements a cancel ended. The zero value is ready; it is safe for
// concurrent use.
type culpritLog struct {
	mu      sync.Mutex
	ids     map[int64]bool
	cancels int
}

// session records one of the culprit's sessions.
func (c *culpritLog) session(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[int64]bool{}
	}
	c.ids[id] = true
}

// has reports whether id is one of the culprit's sessions.
func (c *culpritLog) has(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// sessions returns the culprit's sessions.
func (c *culpritLog) sessions() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	return out
}

// cancelled records a statement of the culprit's ended by a cancel.
func (c *culpritLog) cancelled() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancels++
}

// count returns how many of the culprit's statements a cancel ended.
func (c *culpritLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancels
}

// repeat runs one of the culprit's statements again and again until the
// run ends, a statement fails, or a controller cancels one (the culprit
// then gives up, as a dump or a maintenance job that was killed would).
func (c *culpritLog) repeat(ctx context.Context, stmt func(context.Context) error) error {
	for ctx.Err() == nil {
		if err := stmt(ctx); err != nil || c.count() > 0 {
			return err
		}
	}
	return nil
}

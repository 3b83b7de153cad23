// Package snapshot defines the value that moirai's policies and detectors
// read: a consistent-enough copy of the live tasks, the resources, and what
// each task did with each resource, taken at one moment by the controller
// (or, in moirai guard, built from a database server's own views).
//
// Policies are pure functions of a Snapshot. That is what lets the same
// policy code run inside a process and outside a database, and be tested
// with tables and scripts instead of timing.
//
// # Consistency
//
// A snapshot is taken shard by shard while tasks keep running, so a task
// that begins or ends during the copy may or may not appear, and a
// resource's cumulative totals may momentarily miss a task that ended
// during the copy. Per-window deltas are clamped at zero. Every task's own
// numbers are read with atomic loads and are each exact at the moment read.
package snapshot

import (
	"time"

	"github.com/moirai-go/moirai/latency"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// Snapshot is tasks × resources at one moment, plus what changed in the
// window since the previous snapshot of the controller's loop.
type Snapshot struct {
	// At is the controller clock's time of the snapshot; Time the wall time.
	At   time.Duration
	Time time.Time
	// Window is the time since the previous loop snapshot (0 for the first).
	Window time.Duration
	// Precise reports whether the clock was in precise mode.
	Precise bool
	// Quiet is set by a controller that has overload detectors when none
	// of them fires at this step: a policy called on every step (see
	// policy.Continuous) that acts on overload acts then only where it
	// needs no detector. A source that does not set it (the zero value)
	// leaves every policy to decide as on overload.
	Quiet bool

	Tasks     []Task
	Resources []Resource // indexed as Usage.Res refers to them
	Usage     []Usage    // grouped by task: see Task.First and Task.N

	// Completed describes the tasks that ended in the window.
	Completed Completions
}

// Task is one live task.
type Task struct {
	ID       uint64
	Key      string
	Class    string
	Path     string
	Kind     task.Kind
	Priority task.Priority
	Goal     float64
	// Objective is the task's latency objective (task.Spec.Objective): 0
	// for the detector's own, task.NoObjective for none.
	Objective   time.Duration
	Cancellable bool
	Cancelled   bool
	// Blocked is true while the task waits behind another task (for a lock
	// another task holds, or in a queue behind another waiter): what it
	// holds is held on behalf of the task it waits for, so cancelling it
	// frees nothing that task would not keep. A blocked task is never a
	// candidate of a cancellation policy. The controller's own snapshots
	// also add what a blocked task holds to the entries of the root of its
	// chain (the first task up the chain that does not wait), so that the
	// root's gain includes freeing it.
	Blocked     bool
	Active      bool          // in an activity (not frozen)
	Activities  int64         // activities begun
	Age         time.Duration // since Begin
	Exec        time.Duration // time in activities
	Done, Total int64         // progress reported, 0/0 if none
	// Penalty is the penalty the task has yet to serve (0: none);
	// PenaltyServed the time it spent serving penalties, which Exec does
	// not count; Penalties how many it served.
	Penalty       time.Duration
	PenaltyServed time.Duration
	Penalties     int64
	First, N      int32 // the task's entries are Usage[First:First+N]
}

// HasObjective reports whether the task's misses count: a request whose
// objective is not task.NoObjective.
func (t *Task) HasObjective() bool { return t.Kind == task.Request && t.Objective >= 0 }

// ObjectiveOr returns the task's objective, def when it has none of its
// own (Objective 0).
func (t *Task) ObjectiveOr(def time.Duration) time.Duration {
	if t.Objective > 0 {
		return t.Objective
	}
	return def
}

// Progress returns the task's reported progress as a fraction in [0, 1]
// and whether it reported any.
func (t *Task) Progress() (float64, bool) {
	if t.Total <= 0 {
		return 0, false
	}
	return float64(t.Done) / float64(t.Total), true
}

// Usage is what one task did with one resource.
type Usage struct {
	task.Usage
	Task int32 // index into Snapshot.Tasks
	Res  int32 // index into Snapshot.Resources
}

// Resource is one resource and the totals of every task's use of it.
type Resource struct {
	ID       task.ResourceID
	Name     string
	Kind     resource.Kind
	Capacity int64

	Holders int   // live tasks holding at least one unit
	Waiters int   // live tasks waiting now
	Held    int64 // units held by live tasks
	InUse   int64 // KindMemory: units in use (as the pool reports)
	Queued  int64 // KindQueue: requests waiting for a slot

	// Cumulative over every task, live and ended.
	Wait      time.Duration
	Hold      time.Duration
	Waits     int64
	Evictions int64

	// In the window (cumulative minus the previous loop snapshot's).
	WindowWait      time.Duration
	WindowHold      time.Duration
	WindowWaits     int64
	WindowEvictions int64

	Untracked int64 // events from contexts without a task, cumulative
}

// Completions describes the tasks that ended in a window.
type Completions struct {
	Begun  uint64
	Ended  uint64
	Failed uint64 // with an error or after cancellation
	Exec   time.Duration
	// Latency holds the latencies of the ended tasks that have an
	// objective, each scaled to the controller's objective (see
	// task.Options.Objective): read against that objective, it counts
	// every task's miss of its own.
	Latency latency.Histogram
}

// Throughput returns the tasks ended per second in the window.
func (c *Completions) Throughput(window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return float64(c.Ended) / window.Seconds()
}

// UsageOf returns the usage entries of Tasks[i].
func (s *Snapshot) UsageOf(i int) []Usage {
	t := &s.Tasks[i]
	return s.Usage[t.First : t.First+t.N]
}

// TaskByID returns the index of the task with the given ID, or -1.
func (s *Snapshot) TaskByID(id uint64) int {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return i
		}
	}
	return -1
}

// ResourceByName returns the index of the named resource, or -1.
func (s *Snapshot) ResourceByName(name string) int {
	for i := range s.Resources {
		if s.Resources[i].Name == name {
			return i
		}
	}
	return -1
}

// Holders returns the indexes of the tasks holding resource ri, and of the
// tasks waiting for it.
func (s *Snapshot) Holders(ri int) (holders, waiters []int) {
	for _, u := range s.Usage {
		if int(u.Res) != ri {
			continue
		}
		if u.Held > 0 {
			holders = append(holders, int(u.Task))
		}
		if u.Waiting > 0 {
			waiters = append(waiters, int(u.Task))
		}
	}
	return holders, waiters
}

// Reset empties s, keeping its storage for reuse.
func (s *Snapshot) Reset() {
	tasks, res, usage := s.Tasks[:0], s.Resources[:0], s.Usage[:0]
	*s = Snapshot{Tasks: tasks, Resources: res, Usage: usage}
}

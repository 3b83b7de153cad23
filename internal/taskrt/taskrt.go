// Package taskrt is the door through which the runtime reaches the parts
// of a task that applications never call: the accounting the primitives
// write, the readings the snapshot builder takes, the controller's
// cancellations and penalties (the pattern of grpc-go's internal package).
//
// Package task fills [Set] in its init function with its unexported
// methods; package internal/taskx reads them back with [Get], typed, and is
// what the runtime's packages import. This package imports nothing of
// moirai's, so that task can import it; the type parameters carry task's
// types through without naming them here.
package taskrt

import (
	"context"
	"time"
)

// Hooks are package task's runtime entry points. T is task.Task, U
// task.Usage, R task.ResourceID, G task.Registry, O task.Options, C the
// clock type the registry reads and S task.Spec.
type Hooks[T, U any, R ~uint32, G, O, C, S any] struct {
	// Accounting events, written by the primitives of package resource.
	WaitBegin func(t *T, id R)
	WaitEnd   func(t *T, id R)
	Acquire   func(t *T, id R, n int64) error
	Release   func(t *T, id R, n int64) error
	Evicted   func(t *T, id R, n int64)
	// Claim and AddHold serve a primitive that tracks its holds in
	// progress itself (resource.Mutex).
	Claim   func(t *T, id R)
	AddHold func(t *T, id R, d time.Duration)
	// Units serves a primitive that names some holders itself and accounts
	// the others (resource.Semaphore): the units of resource id in t's
	// accounting.
	Units func(t *T, id R) int64
	// Flagged is the one test a primitive makes before it acquires: the
	// bits FlagBits of the 32-bit state word at offset StateOffset in T,
	// which taskx reads inline, without a call.
	Flagged     func(t *T) bool
	StateOffset uintptr
	FlagBits    uint32

	// Readings of the snapshot builder, the controller and the tests.
	ReadSlots     func(t *T, dst []U, now int64) int
	Claimed       func(t *T) int
	EachUsage     func(t *T, now int64, fn func(U))
	Usage         func(t *T, id R) (U, bool)
	Holding       func(t *T) bool
	Penalty       func(t *T) time.Duration
	PenaltyServed func(t *T) time.Duration
	Penalties     func(t *T) int64
	Activities    func(t *T) int64
	ExecTime      func(t *T, now int64) time.Duration
	Started       func(t *T) int64
	Ended         func(t *T) bool
	Active        func(t *T) bool
	ProgressOf    func(t *T) (done, total int64)

	// The controller's actions.
	Cancel   func(t *T, reason string, because error) error
	Penalize func(t *T, d time.Duration)

	// The middleware's: an inner layer refines the task an outer one
	// began, and re-executes its work from the context it began from.
	Refine func(t *T, s S) bool
	Parent func(t *T) context.Context
	Owner  func(t *T) *G

	// The registry's plumbing.
	NewRegistry  func(clk *C, o O) *G
	Clock        func(g *G) *C
	AppendLive   func(g *G, dst []*T) []*T
	CheckUnended func(g *G, t *T, now int64, grace time.Duration) bool
	LeavePenalty func(g *G, class string, d time.Duration)
	Carried      func(g *G, class string) int
}

var hooks any

// Set records package task's hooks. Only package task calls it, once, in
// its init function.
func Set[T, U any, R ~uint32, G, O, C, S any](h *Hooks[T, U, R, G, O, C, S]) { hooks = h }

// Get returns the hooks [Set] recorded. It panics if they were recorded
// with other types, which would be a mistake in package taskx.
func Get[T, U any, R ~uint32, G, O, C, S any]() *Hooks[T, U, R, G, O, C, S] {
	return hooks.(*Hooks[T, U, R, G, O, C, S])
}

// HolderTagBits is the width of a holder tag (see [HolderTag]).
const HolderTagBits = 29

// HolderTag returns the tag by which a primitive that tracks its holder
// itself names the task with the given ID: the low 29 bits of the ID.
// Tasks whose IDs differ by a multiple of 2²⁹ share a tag; 0 names no task.
func HolderTag(id uint64) uint64 { return id & (1<<HolderTagBits - 1) }

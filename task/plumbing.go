package task

import (
	"unsafe"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskrt"
)

// The runtime's own entry points, which applications never call, are
// unexported methods handed to internal/taskrt here; the runtime's
// packages call them through internal/taskx. A Task's exported methods
// are what an application calls.
func init() {
	taskrt.Set(&taskrt.Hooks[Task, Usage, ResourceID, Registry, Options, clock.Clock, Spec]{
		WaitBegin: (*Task).waitBegin,
		WaitEnd:   (*Task).waitEnd,
		Acquire:   (*Task).acquire,
		Release:   (*Task).release,
		Evicted:   (*Task).evicted,
		Claim:     (*Task).claim,
		AddHold:   (*Task).addHold,
		Units:     (*Task).units,
		Flagged:   (*Task).flagged,

		StateOffset: unsafe.Offsetof(Task{}.state),
		FlagBits:    stateCancelled | statePenalized,

		ReadSlots:     (*Task).readSlots,
		Claimed:       (*Task).claims,
		EachUsage:     (*Task).eachUsage,
		Usage:         (*Task).usage,
		Holding:       (*Task).holding,
		Penalty:       (*Task).penalty,
		PenaltyServed: (*Task).penaltyServed,
		Penalties:     (*Task).penalties,
		Activities:    (*Task).activities,
		ExecTime:      (*Task).execTime,
		Started:       (*Task).started,
		Ended:         (*Task).ended,
		Active:        (*Task).active,
		ProgressOf:    (*Task).progressOf,

		Cancel:   (*Task).cancel,
		Penalize: (*Task).penalize,

		Refine: (*Task).refine,
		Parent: (*Task).parent,
		Owner:  func(t *Task) *Registry { return t.reg },

		NewRegistry:  newRegistry,
		Clock:        func(r *Registry) *clock.Clock { return r.clock },
		AppendLive:   (*Registry).appendLive,
		CheckUnended: (*Registry).checkUnended,
		LeavePenalty: (*Registry).leavePenalty,
		Carried:      (*Registry).carriedFor,
	})
}

// holderTag is the tag by which a primitive that tracks its holder itself
// names the task with the given ID (see taskrt.HolderTag).
func holderTag(id uint64) uint64 { return taskrt.HolderTag(id) }

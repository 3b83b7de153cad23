// Package policy is the seam between moirai's controller and the mechanisms
// that decide: detectors say when to look closely, policies say what to do.
// Both are pure functions of a [snapshot.Snapshot]; the controller owns the
// clock, the loop, the safety checks and the acting.
//
// What plugs in here: package detect's detectors (the SLO and
// throughput-collapse signals), package cancel's Atropos (a [Policy], an
// [Observer] and a [Confirmer]) and package penalty's pBox penalties (a
// [Policy] that is [Continuous]); moirai.WithPolicy and
// moirai.WithDetector add others. Admission (package admit), path fences
// (package fence) and the CPU budget (package cpu) do not: they decide
// inline, on a request's way in, from their own state rather than from
// snapshots, and the middleware (httpmw, grpcmw) or the application wires
// them. Their effects reach the loop as resources: a fence's or a CPU
// pool's workers are a queue whose waits the policies here see.
//
// The same policies run outside a process: moirai guard builds snapshots
// from a database server's views and runs package cancel's policy on
// them.
package policy

import (
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/internal/enum"
	"github.com/moirai-go/moirai/snapshot"
)

// Action is what a decision asks the controller to do.
type Action uint8

const (
	// Cancel the task: cancel its context with moirai.ErrCancelled and run
	// its OnCancel hooks.
	Cancel Action = iota + 1
	// Penalize the task: delay it by Decision.Delay at its next safe point
	// (pBox's penalty; see package penalty).
	Penalize
	// Diagnose records a finding about a class that needs the
	// application's attention (one that cannot complete under load);
	// nothing is done to any task.
	Diagnose
)

// Decision is one thing a policy wants done, with its reasons.
type Decision struct {
	Policy string // the deciding policy's name
	Action Action
	Task   uint64 // the task acted on
	// Class is the task's class as the snapshot showed it (optional): a
	// Penalize decision on a task that has ended by the time it is acted
	// on passes to the next task of this class.
	Class string
	// Delay is the length of a Penalize decision.
	Delay time.Duration
	// Resource names the resource the decision is about (optional): the
	// most contended resource a cancellation frees, the resource a
	// penalized task defers others on. Gain is what acting is expected
	// to free of it, in the deciding policy's unit (package cancel's
	// Atropos: the task's future use of Resource, in seconds of the whole
	// resource, the unit of Record.Lost); 0 when the policy says nothing.
	Resource string
	Gain     float64
	// Reason says in one line why; Details carries the evidence (contention
	// levels, candidates, scores) as structured attributes.
	Reason  string
	Details []slog.Attr
}

// Policy decides what to do from a snapshot. Decide must not modify the
// snapshot nor keep it after returning, and must be safe to call from the
// controller's goroutine while other goroutines run; it is never called
// concurrently with itself.
type Policy interface {
	Name() string
	Decide(s *snapshot.Snapshot) []Decision
}

// Detector tells the controller whether something is wrong now, from the
// snapshot of the current window. While any detector fires, the controller
// ticks fast, keeps its clock precise and runs the policies.
type Detector interface {
	Name() string
	Detect(s *snapshot.Snapshot) (fired bool, reason string)
}

// Observer is implemented by the policies and detectors that learn from
// every snapshot of the loop, whether a detector fires or not (a learner of
// typical durations, a sliding window). The controller calls Observe before
// Detect and Decide on each step, from its goroutine.
type Observer interface {
	Observe(s *snapshot.Snapshot)
}

// Continuous is implemented by the policies that decide on every step of
// the loop, whether a detector fires or not: interference under an
// isolation goal is not overload, and no detector of overload sees it
// (package penalty). Watching reports, after Decide, whether the policy is
// tracking interference and wants the loop's fine tick.
type Continuous interface {
	Watching() bool
}

// Waker is implemented by the policies that know, after Decide, of
// resources where a task beginning to wait would make them act: a lock
// held by a task of a class known to monopolize it, whose next waiter
// makes it the culprit. WakeOn appends those resources' indexes into
// s.Resources to dst. The controller then steps the loop as soon as a
// task begins to wait on one of them, or takes one after a wait while
// others still wait, rather than at its next tick (at most once a
// millisecond: a wake within a millisecond of a step brings the next step
// forward to a millisecond after it).
type Waker interface {
	WakeOn(s *snapshot.Snapshot, dst []int) []int
}

// Preempter is implemented by the policies that know, after Decide, of
// classes whose next task to take a resource they would cancel then,
// before anyone waits: a class each of whose tasks on a lock was
// cancelled as its culprit, while others still come to that lock.
// Preempt appends those orders to dst. Until its next step, the
// controller cancels a task of such a class as it takes the resource,
// on the task's own goroutine, through the same safety checks and
// decision log as the policy's other cancellations. Before the next step's
// Observe, Preempted is told the IDs of the tasks it cancelled so (a task
// cancelled at the lock may have ended before any snapshot showed it
// cancelled: it did not do its class's work); tasks is the controller's,
// valid during the call.
type Preempter interface {
	Preempt(s *snapshot.Snapshot, dst []Preemption) []Preemption
	Preempted(tasks []uint64)
}

// Preemption is one order of a [Preempter]: cancel the next task of Class
// to take s.Resources[Resource], with Reason as the decision's reason.
type Preemption struct {
	Resource int
	Class    string
	Reason   string
}

// Confirmer is implemented by the policies that can tell resource overload
// from regular overload: while a detector fires, Confirm reports whether
// the snapshot shows a contended resource their decisions could relieve.
// When no configured Confirmer confirms, the controller reports regular
// overload, for admission control to handle.
type Confirmer interface {
	Confirm(s *snapshot.Snapshot) bool
}

// Outcome is what the controller did with a decision.
type Outcome uint8

const (
	// Acted: the decision was carried out.
	Acted Outcome = iota + 1
	// Skipped: a safety rule refused it (see Record.Note).
	Skipped
	// DryRun: the controller only records decisions.
	DryRun
)

// Record is a decision as the controller's decision log keeps it.
type Record struct {
	Seq  uint64    // 1, 2, … in the order decided
	Time time.Time // when it was acted on
	Decision
	TaskKey   string
	TaskClass string
	Outcome   Outcome
	Note      string // why it was skipped, or what acting returned
	// Lost is, for an acted cancellation, the resource-time the task had
	// used when it was cancelled (seconds of the whole resource, summed
	// over its resources): the work the cancellation threw away.
	Lost float64
	// TraceID is the W3C trace id (32 lowercase hex digits) of the
	// request the decided task served, as the controller's trace-id
	// function (moirai.WithTraceID) read it from the task's context: the
	// way from a decision to its trace. "" when unknown.
	TraceID string
}

// Attrs returns the record as slog attributes.
func (r *Record) Attrs() []slog.Attr {
	a := []slog.Attr{
		slog.Uint64("seq", r.Seq),
		slog.String("policy", r.Policy),
		slog.String("action", r.Action.String()),
		slog.Uint64("task", r.Task),
		slog.String("class", r.TaskClass),
		slog.String("key", r.TaskKey),
		slog.String("outcome", r.Outcome.String()),
		slog.String("reason", r.Reason),
	}
	if r.Resource != "" {
		a = append(a, slog.String("resource", r.Resource))
	}
	if r.Gain > 0 {
		a = append(a, slog.Float64("gain", r.Gain))
	}
	if r.Delay > 0 {
		a = append(a, slog.Duration("delay", r.Delay))
	}
	if r.Lost > 0 {
		a = append(a, slog.Float64("lost_resource_seconds", r.Lost))
	}
	if r.Note != "" {
		a = append(a, slog.String("note", r.Note))
	}
	if r.TraceID != "" {
		a = append(a, slog.String("trace_id", r.TraceID))
	}
	if len(r.Details) > 0 {
		a = append(a, slog.Attr{Key: "details", Value: slog.GroupValue(r.Details...)})
	}
	return a
}

var actionNames = [...]string{Cancel: "cancel", Penalize: "penalize", Diagnose: "diagnose"}

// String returns the action's name.
func (a Action) String() string { return enum.Name(a, actionNames[:], "action") }

var outcomeNames = [...]string{Acted: "acted", Skipped: "skipped", DryRun: "dry-run"}

// String returns the outcome's name.
func (o Outcome) String() string { return enum.Name(o, outcomeNames[:], "outcome") }

package task

import (
	"context"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskx"
)

// Task is one unit of work the runtime accounts for: a request, a
// connection serving many requests, or a background job. A Task is created
// by [Registry.Begin] and lives until Task.End; its context is cancelled
// with cause [ErrCancelled] if the controller picks it.
//
// Most handlers call only End (deferred, right after Begin) and, for long
// work, Progress. The other methods are for particular shapes of service:
//
//   - a connection or session that serves many requests: Freeze between
//     requests, Activate at the start of each;
//   - work the application can abort itself (a query on another server, a
//     job on a worker): OnCancel, and Cancelled to tell a cancellation from
//     other errors;
//   - code that waits or loops without an instrumented primitive: a safe
//     point for penalties, Pause on the task's own goroutine, or
//     TakePenalty in a worker that serves many tasks;
//   - logging and middleware: ID, Spec, Context, MarkAdmittedDownstream and
//     AdmittedDownstream.
//
// All methods are safe for concurrent use, and all are no-ops on a nil
// *Task, so code can call task.FromContext(ctx).Progress(...) whether or not
// the context carries a task. The methods are documented on [taskx.Task]
// (go doc github.com/moirai-go/moirai/internal/taskx.Task), where the
// runtime that runs them lives.
type Task = taskx.Task

// Registry holds the live tasks of one controller. Begin and End are O(1)
// and take one of several shard locks, never a global one; the controller
// iterates the live tasks shard by shard without stopping anyone else. It
// is safe for concurrent use. Its methods (Begin, Len, Lookup, Now, Stats,
// TotalsInto) are documented on [taskx.Registry].
type Registry = taskx.Registry

// Spec describes a task when it begins. The zero value describes a
// non-cancellable request with no key, class or path, the default goal and
// the highest priority. Its fields (Key, Class, Kind, Cancellable,
// Priority, Path, Tree, Goal, Objective) are documented on [taskx.Spec].
type Spec = taskx.Spec

// Options configure a Registry. The zero value is usable. Its fields
// (OnEnd, Report, HookTimeout, LiveHold, MaxLive, Objective) are documented
// on [taskx.Options].
type Options = taskx.Options

// Priority is DAGOR's compound priority. Lower numbers are more important:
// Business 0 is the most important business priority, User 0 the most
// important user priority. The zero value is the highest priority. See
// [taskx.Priority].
type Priority = taskx.Priority

// Kind says what sort of work a task is: [Request] or [Background].
type Kind = taskx.Kind

// The kinds of work.
const (
	// Request is work a caller waits for: an RPC, an HTTP request, a query.
	Request = taskx.Request
	// Background is work nobody waits for: a purge, a compaction, a backup.
	Background = taskx.Background
)

// ResourceID identifies a resource in a task's accounting. IDs are handed
// out by package resource when a name is resolved; 0 is never a valid ID.
type ResourceID = taskx.ResourceID

// Usage is what one task did with one resource: the accounting the event
// vocabulary (WaitBegin, WaitEnd, Acquire, Release, Evicted) feeds.
// Durations include a wait or a hold still in progress when the Usage was
// read. Its fields are documented on [taskx.Usage].
type Usage = taskx.Usage

// Stats are the registry's counters of events worth an operator's look
// (see [taskx.Stats]).
type Stats = taskx.Stats

// Totals are the cumulative outcomes of the tasks that have ended (see
// [taskx.Totals]).
type Totals = taskx.Totals

// UnendedError reports a task whose context ended without a call to End:
// a leak in the application's instrumentation.
type UnendedError = taskx.UnendedError

// Limits and defaults.
const (
	// CarryFor is how long a penalty left by an ended task waits for the
	// next task of its class: a class that has not begun a task since then
	// was not a stream.
	CarryFor = taskx.CarryFor
	// MaxResources is the number of resource IDs the accounting can tell
	// apart.
	MaxResources = taskx.MaxResources
	// MaxUnits is the most units of one resource a task can hold at once.
	MaxUnits = taskx.MaxUnits
	// DefaultGoal is the isolation goal λ of a task whose spec leaves it
	// zero: the task may spend at most half as long deferred by others as
	// it spends running (pBox's evaluation setting).
	DefaultGoal = taskx.DefaultGoal
	// DefaultMaxLive is the default bound on a registry's live tasks.
	DefaultMaxLive = taskx.DefaultMaxLive
	// MaxPenalty bounds any single penalty the controller gives a task.
	MaxPenalty = taskx.MaxPenalty
	// NoObjective is the Spec.Objective of a task whose latency is
	// nobody's objective: it is never counted as a miss.
	NoObjective = taskx.NoObjective
)

// Errors.
var (
	// ErrCancelled is the cause with which the controller cancels a task's
	// context. errors.Is(context.Cause(ctx), ErrCancelled) tells a handler
	// that moirai picked its task; ctx.Err() is then context.Canceled.
	ErrCancelled = taskx.ErrCancelled
	// ErrInvalidSpec is wrapped by the errors Spec.Validate returns.
	ErrInvalidSpec = taskx.ErrInvalidSpec
	// ErrOverRelease is returned when a task releases more units of a
	// resource than it holds. The release is ignored: the accounting is
	// left as it was.
	ErrOverRelease = taskx.ErrOverRelease
	// ErrTooManyTasks is reported (Options.Report) when Begin refuses a
	// task because the registry holds its bound of live tasks.
	ErrTooManyTasks = taskx.ErrTooManyTasks
	// ErrTooManyUnits is returned when a task would hold more than
	// MaxUnits units of one resource.
	ErrTooManyUnits = taskx.ErrTooManyUnits
	// ErrUnended is the outcome recorded for a task the registry evicted
	// because its context had ended long before without End.
	ErrUnended = taskx.ErrUnended
)

// NewRegistry returns an empty registry of its own, for code that keeps
// tasks without a controller (a tool, a test). It reads the monotonic clock
// at every event, since no controller advances a coarse one; the
// controller's registry (moirai.Controller.Tasks) reads the controller's
// coarse clock instead.
func NewRegistry(o Options) *Registry {
	clk := clock.New()
	clk.SetPrecise(true)
	return taskx.NewRegistry(clk, o)
}

// FromContext returns the task ctx carries, or nil. It panics on a nil
// context, as the standard library does.
func FromContext(ctx context.Context) *Task { return taskx.Settled(taskx.FromContext(ctx)) }

// NewContext returns a copy of parent that carries t, so that events
// emitted with it are charged to t. Event-driven code in which one
// goroutine serves many tasks uses it to carry the right task into each
// piece of work (pBox's bind); the returned context is cancelled only when
// parent is, not when t is: use Task.Context for that.
func NewContext(parent context.Context, t *Task) context.Context {
	return taskx.NewContext(parent, t)
}

// ParseKind parses the names printed by Kind.String.
func ParseKind(s string) (Kind, error) { return taskx.ParseKind(s) }

package moirai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/resrt"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
	"github.com/moirai-go/moirai/trend"
)

// ErrCancelled is the cause with which the controller cancels a task's
// context: errors.Is(context.Cause(ctx), moirai.ErrCancelled) tells the
// application that moirai picked its work.
var ErrCancelled = task.ErrCancelled

// Task is a unit of work the runtime accounts for. See [task.Task].
type Task = task.Task

// Spec describes a task when it begins. See [task.Spec].
type Spec = task.Spec

// Priority is a task's compound (business, user) priority. See
// [task.Priority].
type Priority = task.Priority

// Task kinds.
const (
	Request    = task.Request
	Background = task.Background
)

// NoObjective is the Spec.Objective of a task whose latency is nobody's
// objective. See [task.NoObjective].
const NoObjective = task.NoObjective

// The instrumented primitives. See package resource.
type (
	Mutex     = resource.Mutex
	RWMutex   = resource.RWMutex
	Semaphore = resource.Semaphore
	Queue     = resource.Queue
	Memory    = resource.Memory
	Permit    = resource.Permit
	Resource  = resource.Resource
)

// Resource kinds.
const (
	KindLock   = resource.KindLock
	KindQueue  = resource.KindQueue
	KindMemory = resource.KindMemory
	KindCPU    = resource.KindCPU
	KindIO     = resource.KindIO
)

// From returns the task ctx carries, or nil. Every method of *Task is a
// no-op on nil, so moirai.From(ctx).Progress(done, total) is always safe.
func From(ctx context.Context) *Task { return taskx.Settled(taskx.FromContext(ctx)) }

// WithTask returns a copy of ctx that carries t, for code in which one
// goroutine serves many tasks (an event loop, a shared worker): events
// emitted with the returned context are charged to t.
func WithTask(ctx context.Context, t *Task) context.Context { return task.NewContext(ctx, t) }

// Controller owns a process's tasks, resources, detectors and policies, and
// runs the loop that acts on them. Create one per process with [New] and
// [Controller.Close] it on shutdown. All methods are safe for concurrent
// use.
type Controller struct {
	cfg   config
	clock *clock.Clock
	tasks *task.Registry
	res   *resource.Registry
	log   *slog.Logger

	done     chan struct{}
	loopDone chan struct{}
	closed   atomic.Bool

	// mu guards the loop's state: the snapshot buffers and baselines, the
	// decision log, the cancellation gap. User hooks never run under it.
	mu         sync.Mutex
	snap       snapshot.Snapshot
	live       []*task.Task
	totals     task.Totals
	base       baseline
	firing     bool
	fired      []string
	lastCancel int64
	seq        uint64
	ring       []policy.Record
	ringLen    int
	steps      uint64
	penalties  uint64 // penalties acted on

	regular   bool          // regular (not resource) overload
	busyAt    []int64       // per resource ID−1: last clock time it was used
	stepped   chan struct{} // closed and replaced at every step
	durations *estimate.Durations
	reexec    reexecState

	// gmu guards what every run of Retry touches, the class gates
	// (reexec.gates and their counts) and retries, apart from mu, which
	// the loop holds for a whole step: a request served through Retry
	// never waits for the loop. Never held with mu.
	gmu     sync.Mutex
	retries RetryStats
	budget  budgetState // guarded by mu

	// What the middleware reports about request trees (culprit.go).
	ignoredCulprits atomic.Int64
	noTrustedPeer   atomic.Bool

	scratchLive []*task.Task
	parts       []partial            // per-worker sums of a snapshot build
	liveTab     []resource.LiveHolds // per resource, the holds in progress its primitive reports, read once per snapshot

	// chain is a snapshot build's charging of chains to their roots.
	chain chainScratch

	// wake is what an armed resource calls as a task begins to wait on
	// it (or takes it after a wait, others waiting): a poke, which steps the loop at once (see policy.Waker). armed
	// are the resources armed now, wakeOn the indexes the policies named
	// at the last step; loop only.
	wake   func()
	poke   chan struct{}
	armed  []*resource.Resource
	wakeOn []int

	// preempts are the policies' standing orders at the last step
	// (policy.Preempter), preArmed the resources they are set on; loop
	// only (preempt.go).
	preempts []orderOf
	preArmed []*resource.Resource
	// preempted are the tasks cancelled on standing orders since the
	// last step (under mu).
	preempted []uint64
}

// New returns a running controller.
//
// Unless mechanisms are configured with [WithPolicy] or [WithDetector], or
// turned off with [WithoutMechanisms], it runs targeted cancellation (Atropos):
// the [detect.SLO] detector on the objective of [WithSLO] and the
// [detect.Collapse] detector (throughput below half the recent best), and
// the multi-objective [cancel.Atropos] policy, which acts only on tasks
// begun with Spec.Cancellable set, and pBox's penalties
// ([penalty.Policy]), which delay the tasks that defer others beyond their
// isolation goal ([WithPenalties](false) leaves them out); in front of
// them, early action ([trend.Policy]), which acts on a task whose share
// of a pool, semaphore or cache grows while the others suffer, before
// the objective is missed ([WithEarlyAction](false) leaves it out).
func New(opts ...Option) *Controller {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	durations := cfg.durations
	if durations == nil {
		durations = estimate.NewDurations(0)
	}
	switch {
	case cfg.traceOnly:
		cfg.policies, cfg.detectors = nil, nil
	case len(cfg.policies) == 0 && len(cfg.detectors) == 0:
		cfg.detectors = []policy.Detector{
			detect.NewSLO(cfg.sloQuantile, cfg.sloTarget, detect.WithPrediction(durations)),
			detect.NewCollapse(0.5),
		}
		if cfg.earlyAction {
			cfg.policies = append(cfg.policies, trend.New())
		}
		cfg.policies = append(cfg.policies, cancel.NewAtropos(cancel.MultiObjective,
			cancel.WithDurations(durations), cancel.WithMinGain(cfg.sloTarget/2), cancel.WithPreemption(cfg.preemptAfter)))
		if cfg.penalties {
			cfg.policies = append(cfg.policies, penalty.New())
		}
	}
	c := &Controller{
		cfg:       cfg,
		clock:     clock.New(),
		res:       resource.NewRegistry(),
		log:       cfg.logger,
		done:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		ring:      make([]policy.Record, cfg.logSize),
		stepped:   make(chan struct{}),
		durations: durations,
		poke:      make(chan struct{}, 1),
	}
	c.wake = func() {
		select {
		case c.poke <- struct{}{}:
		default:
		}
	}
	c.clock.SetResolution(cfg.resolution)
	c.tasks = taskx.NewRegistry(c.clock, task.Options{
		OnEnd:       c.fold,
		LiveHold:    c.res.LiveHold,
		Report:      c.report,
		HookTimeout: cfg.hookTimeout,
		Objective:   cfg.sloTarget,
	})
	go c.run()
	return c
}

// report logs an error the runtime recovered from.
func (c *Controller) report(err error) {
	msg := err.Error()
	if ue := (*task.UnendedError)(nil); errors.As(err, &ue) && !c.cfg.logKeys && ue.Key != "" {
		hidden := *ue
		hidden.Key = hiddenKey
		msg = hidden.Error()
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "moirai", slog.String("error", msg))
	if c.cfg.onError != nil {
		func() {
			defer func() { _ = recover() }()
			c.cfg.onError(err)
		}()
	}
}

// Close stops the controller's loop and reports, as errors, the tasks still
// live (begun and never ended). Tasks and resources remain usable after
// Close; only the loop stops. Close is idempotent.
func (c *Controller) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.done)
	<-c.loopDone
	if n := c.tasks.Len(); n > 0 {
		err := fmt.Errorf("moirai: controller closed with %d task(s) never ended", n)
		c.report(err)
		return err
	}
	return nil
}

// Begin starts a task described by spec. The returned context carries the
// task (see [From]) and is cancelled with cause [ErrCancelled] if the
// controller picks the task; pass it to the work and to moirai's
// primitives. Call [Task.End] when the work is over. Begin never fails: an
// invalid spec field is replaced by its default and reported. It panics on a
// nil ctx, as context.WithCancel does.
func (c *Controller) Begin(ctx context.Context, spec Spec) (context.Context, *Task) {
	return c.tasks.Begin(ctx, spec)
}

// Tasks returns the controller's task registry.
func (c *Controller) Tasks() *task.Registry { return c.tasks }

// Resources returns the controller's resource registry.
func (c *Controller) Resources() *resource.Registry { return c.res }

// newMutex makes the controller's mutexes, which read the coarse value of
// its clock inline (see internal/resrt).
var newMutex = resrt.NewMutex.(func(*resource.Resource, *clock.Clock) *resource.Mutex)

// newSemaphore and newQueue make the controller's semaphores and queues,
// which name their holders of one unit in their units word and holder
// slots (see resource.Semaphore and internal/resrt).
var (
	newSemaphore = resrt.NewSemaphore.(func(*resource.Resource, int64, *clock.Clock) *resource.Semaphore)
	newQueue     = resrt.NewQueue.(func(*resource.Resource, int64, int64, *clock.Clock) *resource.Queue)
	armResource  = resrt.Arm.(func(*resource.Resource, *func()))
	armPreempt   = resrt.ArmPreempt.(func(*resource.Resource, []string, func(*task.Task, int) bool))
)

// Stats returns the task registry's counters.
func (c *Controller) Stats() task.Stats { return c.tasks.Stats() }

// Now returns the controller clock's current time.
func (c *Controller) Now() time.Duration { return time.Duration(c.clock.Now()) }

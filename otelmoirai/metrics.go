package otelmoirai

import (
	"context"
	"errors"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// The metrics' names. Their instruments, units and attributes follow the
// semantic conventions' closest precedents, the rate-limiting and
// connection-pool metrics: counters of events with a result attribute,
// up-down counters for what is active or queued now, histograms in
// seconds with advisory bucket boundaries, and counters of seconds (as
// process.cpu.time) for the time summed over tasks. docs/OBSERVABILITY.md
// lists them with their attributes.
const (
	MetricTasks              = "moirai.tasks"
	MetricTasksActive        = "moirai.tasks.active"
	MetricTaskExecTime       = "moirai.task.exec.time"
	MetricCancellations      = "moirai.cancellations"
	MetricCancellationLoss   = "moirai.cancellation.loss"
	MetricPenalties          = "moirai.penalties"
	MetricPenaltyDuration    = "moirai.penalty.duration"
	MetricDiagnoses          = "moirai.diagnoses"
	MetricResourceWaiting    = "moirai.resource.waiting"
	MetricResourceUsage      = "moirai.resource.usage"
	MetricResourceLimit      = "moirai.resource.limit"
	MetricResourceWaitTime   = "moirai.resource.wait.time"
	MetricResourceWaitDur    = "moirai.resource.wait.duration"
	MetricResourceHoldDur    = "moirai.resource.hold.duration"
	MetricResourceHoldTime   = "moirai.resource.hold.time"
	MetricResourceWaits      = "moirai.resource.waits"
	MetricResourceEvictions  = "moirai.resource.evictions"
	MetricReexecutions       = "moirai.reexecutions"
	MetricReexecutionWaiting = "moirai.reexecutions.waiting"
	MetricAdmissionBusiness  = "moirai.admission.business_level"
	MetricAdmissionUser      = "moirai.admission.user_level"
	MetricAdmissionOverload  = "moirai.admission.overloaded"
	MetricAdmissionRejected  = "moirai.admission.rejections"
	MetricAdmissionContinued = "moirai.admission.continuations"
)

// Advisory bucket boundaries, in seconds: a cancellation throws away from
// a millisecond to tens of seconds of a resource's time; a penalty is at
// most task.MaxPenalty (1 s).
var (
	lossBuckets    = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 50}
	penaltyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	useBuckets     = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// syncInstruments are recorded as things happen: decisions (from the
// controller's observer) and penalties served (from Track).
type syncInstruments struct {
	cancellations, penalties, diagnoses metric.Int64Counter
	loss, penalty, wait, hold           metric.Float64Histogram
}

func newSyncInstruments(m metric.Meter) (syncInstruments, error) {
	in := instruments{m: m}
	return syncInstruments{
		cancellations: in.events(MetricCancellations, "{cancellation}", "Cancellations the controller decided, by policy, resource, class and outcome (acted, skipped, dry_run)."),
		penalties:     in.events(MetricPenalties, "{penalty}", "Penalties the controller decided, by policy, resource, class and outcome."),
		diagnoses:     in.events(MetricDiagnoses, "{diagnosis}", "Findings about a class that needs the application's attention, by policy and class."),
		loss:          in.histogram(MetricCancellationLoss, lossBuckets, "Work an acted cancellation threw away: the resource time the task had used, in seconds of the whole resource."),
		penalty:       in.histogram(MetricPenaltyDuration, penaltyBuckets, "Time a task spent serving penalties, per penalized task, by class."),
		wait:          in.histogram(MetricResourceWaitDur, useBuckets, "Time a task waited for the resource, per task that waited for it, by resource and class (tasks followed by Track or Handler)."),
		hold:          in.histogram(MetricResourceHoldDur, useBuckets, "Time a task held the resource, per task that held it, by resource and class (tasks followed by Track or Handler)."),
	}, in.err
}

// controllerMetrics reads a controller's state at collection time, as
// package metrics' Prometheus collector does.
type controllerMetrics struct {
	ctl                                 *moirai.Controller
	tasks, active, reexec, reexecWait   metric.Int64Observable
	waiting, usage, limit, waits, evict metric.Int64Observable
	exec, wait, hold                    metric.Float64Observable
	okSet, errSet                       metric.MeasurementOption
	reexecSets                          [3]metric.MeasurementOption
}

func newControllerMetrics(m metric.Meter, ctl *moirai.Controller) (*controllerMetrics, []metric.Observable, error) {
	c := &controllerMetrics{ctl: ctl,
		okSet:  metric.WithAttributeSet(attribute.NewSet(AttrResult.String("ok"))),
		errSet: metric.WithAttributeSet(attribute.NewSet(AttrResult.String("error"))),
	}
	for i, r := range []string{"reexecuted", "dropped", "interrupted"} {
		c.reexecSets[i] = metric.WithAttributeSet(attribute.NewSet(AttrResult.String(r)))
	}
	in := instruments{m: m}
	c.tasks = in.counter(MetricTasks, "{task}", "Tasks that ended, by result: ok, or error (an error, a 5xx answer, a panic, or a cancellation).")
	c.active = in.upDown(MetricTasksActive, "{task}", "Tasks begun and not ended.")
	c.exec = in.seconds(MetricTaskExecTime, "Execution time of the tasks that ended. rate(moirai.resource.wait.time)/rate(this) is a resource's contention level.")
	c.waiting = in.upDown(MetricResourceWaiting, "{task}", "Tasks waiting for the resource now.")
	c.usage = in.upDown(MetricResourceUsage, "{unit}", "Units of the resource held now.")
	c.limit = in.upDown(MetricResourceLimit, "{unit}", "The resource's capacity in units (counted resources: semaphores, queues, memory).")
	c.wait = in.seconds(MetricResourceWaitTime, "Time the tasks that ended waited for the resource.")
	c.hold = in.seconds(MetricResourceHoldTime, "Time the tasks that ended held the resource.")
	c.waits = in.counter(MetricResourceWaits, "{wait}", "Waits for the resource (for memory: misses) by the tasks that ended.")
	c.evict = in.counter(MetricResourceEvictions, "{unit}", "Units of a memory resource the tasks that ended evicted.")
	c.reexec = in.counter(MetricReexecutions, "{run}", "Cancelled runs of moirai.Retry and the middlewares' re-execution, by result: reexecuted, dropped (no window in time), interrupted (the caller gave up).")
	c.reexecWait = in.upDown(MetricReexecutionWaiting, "{run}", "Cancelled runs waiting for a window to be re-executed.")
	obs := []metric.Observable{c.tasks, c.active, c.exec, c.waiting, c.usage, c.limit, c.wait, c.hold, c.waits, c.evict, c.reexec, c.reexecWait}
	return c, obs, in.err
}

func (c *controllerMetrics) observe(_ context.Context, o metric.Observer) error {
	var tot task.Totals
	c.ctl.Tasks().TotalsInto(&tot)
	st := c.ctl.Stats()
	o.ObserveInt64(c.tasks, int64(tot.Ended-tot.Failed), c.okSet)
	o.ObserveInt64(c.tasks, int64(tot.Failed), c.errSet)
	o.ObserveInt64(c.active, int64(st.Live))
	o.ObserveFloat64(c.exec, tot.Exec.Seconds())
	rs := c.ctl.RetryStats()
	for i, v := range []uint64{rs.Reexecuted, rs.Dropped, rs.Interrupted} {
		o.ObserveInt64(c.reexec, int64(v), c.reexecSets[i])
	}
	o.ObserveInt64(c.reexecWait, int64(rs.Waiting))
	for _, r := range c.ctl.Resources().All() {
		if r == nil {
			continue
		}
		set := metric.WithAttributeSet(attribute.NewSet(AttrResource.String(r.Name())))
		o.ObserveInt64(c.waiting, r.QueueLength(), set)
		o.ObserveInt64(c.usage, r.Resident(), set)
		if cp := r.Capacity(); cp > 0 {
			o.ObserveInt64(c.limit, cp, set)
		}
		e := r.EndedTotals()
		o.ObserveFloat64(c.wait, e.Wait.Seconds(), set)
		o.ObserveFloat64(c.hold, e.Hold.Seconds(), set)
		o.ObserveInt64(c.waits, e.Waits, set)
		if r.Kind() == resource.KindMemory {
			o.ObserveInt64(c.evict, e.Evictions, set)
		}
	}
	return nil
}

// admissionMetrics reads a DAGOR admitter's state at collection time.
type admissionMetrics struct {
	d                                    *admit.DAGOR
	set                                  metric.MeasurementOption
	name                                 string
	business, user, over, rej, continued metric.Int64Observable
	rejected                             [admit.BusinessLevels]int64
}

func newAdmissionMetrics(m metric.Meter, name string, d *admit.DAGOR) (*admissionMetrics, []metric.Observable, error) {
	a := &admissionMetrics{d: d, name: name, set: metric.WithAttributeSet(attribute.NewSet(AttrAdmitter.String(name)))}
	in := instruments{m: m}
	a.business = in.gauge(MetricAdmissionBusiness, "{level}", "DAGOR admission level, business part: requests of business priority above it are rejected (see admit.Level.Admits).")
	a.user = in.gauge(MetricAdmissionUser, "{level}", "DAGOR admission level, user part, within the business level.")
	a.over = in.gauge(MetricAdmissionOverload, "1", "1 when the admitter's last window was overloaded, else 0.")
	a.rej = in.counter(MetricAdmissionRejected, "{request}", "Arrivals the admitter rejected, by business priority (0 most important; 63 also counts arrivals without a priority).")
	a.continued = in.counter(MetricAdmissionContinued, "{request}", "Continuations admitted only by the grace after a cut of the level.")
	return a, []metric.Observable{a.business, a.user, a.over, a.rej, a.continued}, in.err
}

func (a *admissionMetrics) observe(_ context.Context, o metric.Observer) error {
	lv := a.d.Level()
	o.ObserveInt64(a.business, int64(lv.Business), a.set)
	o.ObserveInt64(a.user, int64(lv.User), a.set)
	over := int64(0)
	if a.d.Overloaded() {
		over = 1
	}
	o.ObserveInt64(a.over, over, a.set)
	o.ObserveInt64(a.continued, a.d.Continued(), a.set)
	a.d.RejectedInto(&a.rejected)
	for b, n := range a.rejected {
		if n > 0 {
			o.ObserveInt64(a.rej, n, metric.WithAttributes(AttrAdmitter.String(a.name), AttrBusiness.Int(b)))
		}
	}
	return nil
}

// instruments creates instruments on m, joining their errors into err, so
// a constructor states its instruments one a line.
type instruments struct {
	m   metric.Meter
	err error
}

// events is a counter recorded as things happen. A meter that refuses it
// may return nil: it is then a no-op, so that recording never panics.
func (in *instruments) events(name, unit, desc string) metric.Int64Counter {
	c, err := in.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.err = errors.Join(in.err, err)
	if c == nil {
		return noop.Int64Counter{}
	}
	return c
}

// histogram is a histogram of seconds recorded as things happen, nil
// refused as events' counters are.
func (in *instruments) histogram(name string, buckets []float64, desc string) metric.Float64Histogram {
	h, err := in.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(buckets...))
	in.err = errors.Join(in.err, err)
	if h == nil {
		return noop.Float64Histogram{}
	}
	return h
}

func (in *instruments) counter(name, unit, desc string) metric.Int64Observable {
	o, err := in.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.err = errors.Join(in.err, err)
	return o
}

func (in *instruments) upDown(name, unit, desc string) metric.Int64Observable {
	o, err := in.m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.err = errors.Join(in.err, err)
	return o
}

func (in *instruments) gauge(name, unit, desc string) metric.Int64Observable {
	o, err := in.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.err = errors.Join(in.err, err)
	return o
}

// seconds is a counter of seconds.
func (in *instruments) seconds(name, desc string) metric.Float64Observable {
	o, err := in.m.Float64ObservableCounter(name, metric.WithUnit("s"), metric.WithDescription(desc))
	in.err = errors.Join(in.err, err)
	return o
}

package bench

import "time"

// Row is the result of one (case, controller) pair: what `moirai bench run
// -o json` prints, one object per row, and what results.json holds. Field
// names are part of the command's interface.
type Row struct {
	Suite      string `json:"suite"`
	Case       string `json:"case"`
	Controller string `json:"controller"`

	// Normalized by the same case run without its culprit and without
	// control, in the same invocation.
	ThroughputNorm float64 `json:"throughput_norm"`
	P99Norm        float64 `json:"p99_norm"`

	// DropRate is the requests whose final answer was a rejection or a
	// cancellation (not re-executed), over all requests. Cancelled and its
	// split count the controller's cancellations, re-executed or not.
	DropRate          float64 `json:"drop_rate"`
	Cancelled         int     `json:"cancelled"`
	CulpritsCancelled int     `json:"culprits_cancelled"`
	VictimsCancelled  int     `json:"victims_cancelled"`
	// CulpritHoldAfterMs is, in the tree suite, the resource-time the
	// culprit trees held after the first decision on them, summed over
	// the services (mean per culprit tree); RetriesIntoOverload the
	// culprit calls the frontend sent again into the overloaded backend.
	CulpritHoldAfterMs  float64 `json:"culprit_hold_after_ms,omitempty"`
	RetriesIntoOverload int     `json:"retries_into_overload,omitempty"`
	// DecidedAfterMs is, in the tree suite, the mean time from a culprit
	// tree's arrival to the first cancellation of one of its calls (its
	// P99Ms is the light trees' p99).
	DecidedAfterMs float64 `json:"decided_after_ms,omitempty"`
	Rejected       int     `json:"rejected"`
	// Reexecuted counts the cancelled requests run again once their
	// resources were free (controllers with re-execution), which then
	// count as what their second run returned.
	Reexecuted int `json:"reexecuted"`
	// ReexecutedOK counts the re-executions that completed.
	ReexecutedOK int `json:"reexecuted_ok"`
	// ReexecGaveUp counts the cancelled requests whose re-execution gave
	// up: no window within the bounded wait, or the objective out of
	// reach (moirai.RetryStats.Dropped); ReexecInterrupted those whose
	// caller went away while they waited (the run's end).
	ReexecGaveUp      int `json:"reexec_gave_up"`
	ReexecInterrupted int `json:"reexec_interrupted"`
	// WorkLost is the work the controller's cancellations threw away: the
	// resource-time the cancelled tasks had used when cancelled, in
	// seconds of the whole resource, summed (see estimate.Spent).
	WorkLost float64 `json:"work_lost"`
	// SLOAttainment is the fraction of light requests that completed
	// within the case's latency objective.
	SLOAttainment float64 `json:"slo_attainment"`

	// The victims' (light requests') mean latency in the normal run, the
	// uncontrolled run with the culprit, and this run: the inputs of pBox's
	// interference reduction ratio.
	VictimMeanNormalMs       float64 `json:"victim_mean_normal_ms"`
	VictimMeanUncontrolledMs float64 `json:"victim_mean_uncontrolled_ms"`
	VictimMeanMs             float64 `json:"victim_mean_ms"`

	// InterferenceReduction is pBox's r = (T_i − T_s) / (T_i − T_o) of
	// the victims' mean latency (1: the interference is removed; 0: no
	// better than no control), absent when the culprit made the victims
	// no slower.
	InterferenceReduction *float64 `json:"interference_reduction,omitempty"`
	// NoisySlowdown is the culprits' mean latency in this run over their
	// mean latency in the uncontrolled run (pBox: noisy tasks 34 % slower).
	NoisySlowdown  float64 `json:"noisy_slowdown,omitempty"`
	NoisyMeanMs    float64 `json:"noisy_mean_ms,omitempty"`
	NoisyMeanUncMs float64 `json:"noisy_mean_uncontrolled_ms,omitempty"`
	// Penalties counts the acted penalties (pBox), VictimsPenalized those
	// that hit a light request. PenaltySteps is the number of penalties of
	// culprits before their length stopped changing by more than 5 %, and
	// PenaltyFinalMs the last length.
	Penalties        int     `json:"penalties,omitempty"`
	VictimsPenalized int     `json:"victims_penalized,omitempty"`
	PenaltySteps     int     `json:"penalty_steps,omitempty"`
	PenaltyFinalMs   float64 `json:"penalty_final_ms,omitempty"`

	// NoCulprit marks the rows of a run without culprits (see
	// Options.NoCulprit): the controller's cost when nothing goes wrong.
	NoCulprit bool `json:"no_culprit,omitempty"`

	// The cpu suite's measures, zero and omitted in the other suites: the
	// work items' p99 and maximum work latency (from start to end on a
	// worker) and p99 queue latency (from arrival to start), in
	// milliseconds, over the items of every process; the items completed
	// and offered per second, all processes summed; the pools' mean
	// active counts, summed; and the CPUs the host's other processes kept
	// busy meanwhile (the machine's background load).
	P99Ms      float64 `json:"p99_ms,omitempty"`
	MaxMs      float64 `json:"max_ms,omitempty"`
	QueueP99Ms float64 `json:"queue_p99_ms,omitempty"`
	Throughput float64 `json:"throughput,omitempty"`
	Offered    float64 `json:"offered,omitempty"`
	ActiveMean float64 `json:"active_mean,omitempty"`
	Background float64 `json:"background_cpus,omitempty"`

	// The dagor suite's measures, zero and omitted in the other suites:
	// the feed rate over the rate that saturates M for the workload
	// (f / f_sat); the fraction of tasks that succeeded, and the optimum
	// min(1, f_sat/f); the fraction of M's completed work spent on tasks
	// that failed; and, for the mixed workload, the success rate of the
	// tasks making 1, 2, 3 and 4 calls to M.
	FeedRatio          float64   `json:"feed_ratio,omitempty"`
	SuccessRate        float64   `json:"success_rate,omitempty"`
	OptimalSuccessRate float64   `json:"optimal_success_rate,omitempty"`
	WastedWork         float64   `json:"wasted_work,omitempty"`
	SuccessByCalls     []float64 `json:"success_by_calls,omitempty"`

	// Error is set when the row failed (its controller panicked, the
	// service could not start); the numbers are then zero.
	// The pathfence suite's measures, zero and omitted in the other
	// suites (with P99Ms and Throughput above): the path of U the row
	// is about (affected, unaffected, local), the mean latency of its
	// successful requests, the requests sent after the warm-up and those
	// dropped (timed out or rejected).
	Path    string  `json:"path,omitempty"`
	MeanMs  float64 `json:"mean_ms,omitempty"`
	Sent    int     `json:"sent,omitempty"`
	Dropped int     `json:"dropped,omitempty"`
	// Permits is the path's reservation at the end of the run, under
	// the fenced controllers (what pathfence-sct's tuner settled on).
	Permits int `json:"permits,omitempty"`

	// The locktopo suite's tallies, zero and omitted in the other suites
	// (Case is the topology, Controller the guard, MaxMs the slowest
	// in-time root action): the server; the generated scenarios run,
	// those with an actionable root, those whose actionable roots were
	// acted on within the objective plus two polls and those acted on
	// later; the wrong actions (on a waiting session, a non-actionable
	// root, or outside the scenario) and the scenarios with one; the
	// scenarios that could not be built, and those skipped (Note says
	// why).
	Server         string `json:"server,omitempty"`
	Scenarios      int    `json:"scenarios,omitempty"`
	Actionable     int    `json:"actionable,omitempty"`
	RootActed      int    `json:"root_acted,omitempty"`
	RootLate       int    `json:"root_late,omitempty"`
	WrongActions   int    `json:"wrong_actions,omitempty"`
	WrongScenarios int    `json:"wrong_scenarios,omitempty"`
	BuildFailed    int    `json:"build_failed,omitempty"`
	Disturbed      int    `json:"disturbed,omitempty"`
	Skipped        int    `json:"skipped,omitempty"`
	Note           string `json:"note,omitempty"`

	Error string `json:"error,omitempty"`
	// Degraded is the sanity check of the case, set on the row of the
	// uncontrolled run ("none"): whether the culprit degrades the service
	// (throughput_norm ≤ 0.8 or p99_norm ≥ 2).
	Degraded *bool `json:"degraded,omitempty"`
}

// Run is the raw measurement of one run, from which rows are computed and
// report plots drawn.
type Run struct {
	Case        string `json:"case"`
	Controller  string `json:"controller"` // "normal" for the run without culprit
	WithCulprit bool   `json:"with_culprit"`

	Duration time.Duration `json:"duration_ns"`
	// InjectedAt is when the culprit was sent, from the start of the run
	// (0 when there is none).
	InjectedAt time.Duration `json:"injected_at_ns"`

	Light   Summary `json:"light"`
	Culprit Summary `json:"culprit"`
	// Reexecuted counts the requests re-executed after a cancellation,
	// ReexecutedOK those of them that completed.
	Reexecuted   int `json:"reexecuted,omitempty"`
	ReexecutedOK int `json:"reexecuted_ok,omitempty"`
	// ReexecGaveUp and ReexecInterrupted count the re-executions given up
	// (moirai.RetryStats.Dropped) and interrupted by their caller.
	ReexecGaveUp      int `json:"reexec_gave_up,omitempty"`
	ReexecInterrupted int `json:"reexec_interrupted,omitempty"`

	// Series is the light requests' throughput and p99 per bucket of
	// SeriesStep, from the start of the run.
	// Path is the path of U the run's series is about, in the pathfence
	// suite.
	Path string `json:"path,omitempty"`

	SeriesStep time.Duration `json:"series_step_ns"`
	Series     []Point       `json:"series"`
	// Events are the controller's actions and other marks on the time
	// axis: the culprit's injection, cancellations, rejections.
	Events []Event `json:"events"`
}

// Summary describes one kind of request over a run.
type Summary struct {
	Sent      int `json:"sent"`
	OK        int `json:"ok"`
	Cancelled int `json:"cancelled"`  // by the controller
	Rejected  int `json:"rejected"`   // by admission
	Failed    int `json:"failed"`     // other errors
	Unfinish  int `json:"unfinished"` // still running when the run ended
	// Latencies of the requests that completed and of those unfinished at
	// the end (counted with their time so far), in milliseconds.
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Throughput is OK requests per second over the run.
	Throughput float64 `json:"throughput"`
	// WithinSLO is the number of OK requests faster than the objective.
	WithinSLO int `json:"within_slo"`
}

// Point is one bucket of a time series.
type Point struct {
	T          time.Duration `json:"t_ns"`
	Throughput float64       `json:"throughput"` // OK light requests per second
	P99Ms      float64       `json:"p99_ms"`     // of light requests that ended in the bucket
}

// Event is a mark on a run's time axis.
type Event struct {
	T    time.Duration `json:"t_ns"`
	Kind string        `json:"kind"` // "culprit", "cancel-culprit", "cancel-victim", "penalize-culprit", "penalize-victim", "reject", "reexecute", "diagnose"
	// Delay is the length of a penalty.
	Delay time.Duration `json:"delay_ns,omitempty"`
	// Lost is a cancellation's work lost (see Row.WorkLost).
	Lost float64 `json:"lost,omitempty"`
	Note string  `json:"note,omitempty"`
}

// Results is what `moirai bench run --out DIR` writes to results.json.
type Results struct {
	Suite    string    `json:"suite"`
	Started  time.Time `json:"started"`
	Seed     uint64    `json:"seed"`
	Duration string    `json:"duration"`
	Machine  Machine   `json:"machine"`
	// Params are the suite's other parameters, by name (omitted when the
	// suite has none beyond the ones above).
	Params map[string]string `json:"params,omitempty"`
	// RunsMeasured is the number of runs measured when Runs keeps only
	// some of them (a saved file trimmed by `moirai bench trim`); 0 when
	// Runs holds every run.
	RunsMeasured int   `json:"runs_measured,omitempty"`
	Rows         []Row `json:"rows"`
	Runs         []Run `json:"runs"`
}

// NumRuns returns the number of runs measured, whether or not Runs still
// holds them all.
func (r *Results) NumRuns() int { return max(r.RunsMeasured, len(r.Runs)) }

// Machine describes where the results were measured.
type Machine struct {
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
}

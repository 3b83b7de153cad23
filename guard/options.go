package guard

import (
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a [Guard]. The zero value of each field is its
// default.
type Options struct {
	// Interval between polls (default 250 ms).
	Interval time.Duration
	// AlertInterval is the interval between polls while a session waits
	// for a lock (default the smaller of Interval and 100 ms; never more
	// than Interval). The guard polls faster only then, so a quiet server
	// pays the slow rate, and a culprit is confirmed and cancelled a few
	// hundred milliseconds sooner than at Interval. Neither interval is
	// kept when the server's views would not be fresh yet (see
	// Observation.Refresh).
	AlertInterval time.Duration
	// SLO is the wait the guard tolerates: once a session has waited this
	// long for a lock, or is expected to by the time the lock's holders
	// let go, or the server has lost throughput for this long (see
	// ServerResource), the guard looks for the culprit, and acts if the
	// policy confirms a contended resource (default 1 s).
	SLO time.Duration
	// DryRun decides and logs, never acts. (The library acts unless told
	// not to; the command line runs dry unless given --act.)
	DryRun bool
	// Database is the database the guard acts in: it never acts on a
	// session of another database, nor on the root of a chain of waits
	// that crosses into another (it reports the chain instead). Empty: the
	// database the source connected to (the DSN's), when the source names
	// one (see [Scoped]); a source that names none (an empty database in
	// a MariaDB DSN), or does not implement Scoped (a wrapping source),
	// makes New fail unless AllDatabases is set.
	Database string
	// AllDatabases lets the guard act in every database of the server.
	AllDatabases bool
	// AuditRawSQL makes the audit hold each statement's text; by default
	// it holds the statement's fingerprint (its literals removed).
	AuditRawSQL bool
	// Protect lists the sessions never acted on.
	Protect Protection
	// TerminateIdle allows ending the connection of a culprit that is idle
	// in transaction (a statement cancel cannot reach it). Off by default.
	TerminateIdle bool
	// MinInterval separates two actions (default 1 s); MaxPerMinute bounds
	// them (default 10).
	MinInterval  time.Duration
	MaxPerMinute int
	// Lease names the lease the replicas of one guard share, so that only
	// the one holding it acts (see [Leaser]). It is taken whenever the
	// guard acts (not DryRun) and its source is a Leaser, unless NoLease.
	// Default "moirai-guard:" and the database acted in ("*" for every
	// one): replicas guarding one database exclude each other, guards of
	// two databases do not.
	Lease   string
	NoLease bool
	// Record receives one JSON line per poll, the observation as the guard
	// saw it (nil: none), for Replay. AuditPolls writes those lines to
	// Audit instead, among the decisions, when Record is nil.
	Record     io.Writer
	AuditPolls bool
	// Audit receives one JSON line per decision (nil: none).
	Audit io.Writer
	// Logger logs polls that fail and actions (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer registers the guard's metrics (nil: none). Never the
	// global registry unless the caller passes it.
	Registerer prometheus.Registerer
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.AlertInterval <= 0 {
		o.AlertInterval = min(o.Interval, 100*time.Millisecond)
	}
	o.AlertInterval = min(o.AlertInterval, o.Interval)
	if o.SLO <= 0 {
		o.SLO = time.Second
	}
	if o.MinInterval <= 0 {
		o.MinInterval = time.Second
	}
	if o.MaxPerMinute <= 0 {
		o.MaxPerMinute = 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = escaping(o.Logger)
}

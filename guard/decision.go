package guard

import "time"

// Outcome of one decision of the guard.
const (
	OutcomeActed   = "acted"
	OutcomeDryRun  = "dry-run"
	OutcomeSkipped = "skipped"
	OutcomeFailed  = "failed"
	// OutcomeStandby: the guard would act, but another replica holds the
	// lease (see Leaser); recorded once per task.
	OutcomeStandby = "standby"
	// OutcomeNoAction: a chain of waits has waited long enough to act on
	// and its root cannot be acted on (Note says why, Blocked the reason's
	// code); the guard acts on nobody in that chain, never on a waiter.
	OutcomeNoAction = "no-action"
)

// Reasons a chain's root cannot be acted on (Decision.Blocked, and the
// label of the metric moirai_guard_chains_not_acted_total).
const (
	BlockedProtected  = "protected"   // the guard's own session, a protected user, application or statement
	BlockedSuperuser  = "superuser"   // a superuser (or privileges unreadable: fails closed)
	BlockedServer     = "maintenance" // a session of the server's own (autovacuum, replication, ...)
	BlockedIdle       = "idle"        // idle in transaction, without TerminateIdle
	BlockedNotRunning = "not-running" // holds a lock between statements outside a transaction (FTWRL, LOCK TABLES)
	BlockedScope      = "scope"       // the root, or a waiter of its chain, is in another database
	BlockedNoRoot     = "no-root"     // the server does not show whom the chain waits for
)

// Decision is one thing the guard decided, and what became of it.
type Decision struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"` // "cancel" or "terminate"
	Outcome string    `json:"outcome"`
	Note    string    `json:"note,omitempty"` // why it was skipped or failed
	Task    uint64    `json:"task"`
	Target  Target    `json:"target"`
	User    string    `json:"user"`
	App     string    `json:"application"`
	Reason  string    `json:"reason"`
	// Root is the root of the chain of waits the decision is about: the
	// target itself when the guard acts on a lock's holder; the root left
	// alone in a no-action decision. 0 for the server's resource.
	Root int64 `json:"root,omitempty"`
	// Resource is the contended resource of a no-action decision's chain;
	// Waiters the sessions waiting in it.
	Resource string  `json:"resource,omitempty"`
	Waiters  []int64 `json:"waiters,omitempty"`
	// Blocked is why no action was taken on the chain (Blocked* codes).
	Blocked string `json:"blocked,omitempty"`
	// Inferred: the target's hold was inferred by the source, not shown
	// by the server (MariaDB metadata locks without a lock view).
	Inferred bool `json:"inferred,omitempty"`
	// Evaluation is the policy's reasoning: contention per resource, the
	// candidates and their gains.
	Evaluation map[string]any `json:"evaluation,omitempty"`
}

// Package guard applies moirai's targeted cancellation to a database server
// from the outside. A [Source] (package guard/postgres or guard/mysql) reads
// who holds and who waits for what from the server's own views; the guard
// turns successive polls into the same [snapshot.Snapshot] the in-process
// controller builds, runs the library's Atropos policy on it unchanged, and
// cancels the culprit's statement through the server's own cancel command,
// verified so that it can never hit a different statement.
//
// # Blame
//
// Each poll's waits are charged to the roots of their chains in the
// server's wait-for graph ([Use.BlockedBy], resolved by the sources; see
// [Chain]): in the snapshot a session that waits is a blocked task
// ([snapshot.Task.Blocked]) holding nothing, which the policy never
// chooses, and a contended lock is held by its waits' roots only. When a
// chain's root cannot be acted on (protected, a superuser, a server
// session, idle in transaction without [Options.TerminateIdle], outside
// the scope [Options.Database]), nobody in the chain is acted on, and the
// guard returns a [Decision] with [OutcomeNoAction], its Root and why.
//
// # Replicas, reloads, recordings
//
// An acting guard whose source is a [Leaser] acts only while it holds a
// lease through the server itself (a PostgreSQL advisory lock, a MariaDB
// GET_LOCK, on a connection of the source's own, which carries the
// actions too): of two replicas on one server one acts, the other stands
// by ([RoleStandby], [OutcomeStandby]) and takes over when the server
// releases the lease, at its next poll. [Guard.Reload] replaces the
// options between polls, keeping the audit, the metrics and the history;
// [Guard.Stop] stops after the poll in progress; [Guard.Status] is what a
// health check reads. [Options.Record] writes every poll, [ReadPolls] and
// [Replay] run the decision logic on them again.
//
// # Outputs
//
// Every string a server supplies goes through [Escape] before any output
// (text, JSON, audit, logs, metric labels): control characters and
// bidirectional overrides become visible escapes.
//
// # What a harness reads
//
// Every [Decision] (from [Guard.Step] and [Guard.Decisions]) names its
// target session, the root of the chain it is about ([Decision.Root]),
// and, when no action was taken, why ([Decision.Blocked],
// [Decision.Note]); [Guard.Explain] gives the chains of the last poll.
// docs/GUARD.md is the operator's guide and the design of the blame.
package guard

import "github.com/moirai-go/moirai/snapshot"

var _ snapshot.Snapshot

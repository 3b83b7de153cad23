// Package locktopo proves `moirai guard`'s blame on generated lock
// topologies against the real servers (PostgreSQL and MariaDB).
//
// Each scenario is generated from a seed ([Generate]) with its ground
// truth known by construction: which session holds what, which sessions
// wait, which of the roots (the holders that wait for nothing) the guard
// may act on. The topologies: row-lock queues of 2–30 waiters on 1–3 hot
// rows, chains A→B→C…, shared and exclusive mixes, DDL queued behind
// readers with statements queued behind the DDL, FLUSH TABLES WITH READ
// LOCK behind a long UPDATE (MariaDB), advisory locks that share an objid
// (PostgreSQL), and queues whose root is in another database. A root is
// active, idle in transaction, of a protected user or application, or a
// superuser.
//
// [Run] creates its own databases and roles (moirai_locktopo_<run>…),
// builds each scenario on its own sessions, runs an acting guard scoped to
// the run's database, and checks what the guard did: no action on a
// session that waits, on a non-actionable root, or outside the scenario
// (victims acted on: 0); every actionable root acted on in time: the
// first within the objective plus two polls of the first wait, each
// further one within the guard's minimum interval between actions plus a
// poll after the one before (the guard acts at most once a second, and
// only at a poll). The guard's source is wrapped: every
// Cancel and Terminate it asks for is recorded, and only those on the
// scenario's own sessions are carried out. The run ends only its own
// sessions and drops what it created, also on failure; each scenario is
// bounded in time.
//
// A failure prints its scenario's seed; Options.Replay runs one seed
// again (`moirai bench run --suite locktopo --replay SEED`, or the test's
// LOCKTOPO_REPLAY).
package locktopo

// Package mysql is the guard's source for MariaDB (10.6 and later; built
// and tested against 10.11) over go-sql-driver/mysql.
//
// A poll reads information_schema.PROCESSLIST, INNODB_TRX,
// INNODB_LOCK_WAITS joined with INNODB_LOCKS, the metadata lock view when
// one exists (the METADATA_LOCK_INFO plugin, else Performance Schema's
// metadata_locks, else none: see Check's Features), and SHOW GLOBAL
// STATUS/VARIABLES for the buffer pool, connection slots and
// Handler_commit/Handler_rollback (every committed transaction, autocommit
// statements included). Rows are parsed by pure functions over the
// scanned sql.Null* values; a row with a NULL where a value must be, an
// unknown COMMAND word or a negative TIME_MS is skipped and counted in
// Observation.Skipped.
//
// Soft blocking: a FLUSH TABLES WITH READ LOCK or a DDL queued behind a
// long statement makes every later statement wait too. Every such waiter
// is attributed to the root holders (the long statements), never to the
// queued FTWRL/DDL, and waits of statements other than the queued
// FTWRL/DDL are marked Soft. With a metadata lock view a table metadata
// lock waiter is attributed to the non-waiting holders of an MDL on its
// table; without one it is reported with no BlockedBy: the source never
// blames a session it cannot tie to the lock. A global read lock or table
// flush wait is tied to the sessions whose statements were running before
// the oldest queued FLUSH began and do not wait themselves: FTWRL waits
// for exactly those.
//
// Cancel uses KILL QUERY ID, which targets the statement id and so cannot
// hit a later statement; Terminate uses KILL CONNECTION after verifying the
// session still runs the same statement and transaction.
package mysql

// Package dbsuite is moirai's database bench suite: real servers, real
// clients, in two suites.
//
// Suite "postgres": pgbench runs the victims (short updates and reads of a
// hot set of rows, closed loop or open loop with -R) and logs every
// transaction (-l); the case's culprit runs on its own sessions
// (application_name "dbsuite-culprit") once the warm-up is over; the
// controller is none, timeout (statement_timeout and lock_timeout on every
// session), ptkill (pt-kill's --busy-time/--victims oldest/--kill-query rule
// as a SQL loop) or guard (moirai guard in-process with guard/postgres).
//
// Suite "mysql" (MariaDB): sysbench runs the same victims from a generated
// Lua script and reports the post-warm-up interval with a latency
// histogram; the culprit runs on its own connections, which the suite
// knows by id; the controller is none, timeout (max_statement_time,
// innodb_lock_wait_timeout and lock_wait_timeout on every session), ptkill
// (the real pt-kill, whose --print log gives the ids it killed) or guard
// (moirai guard in-process with guard/mysql).
//
// Throughput, p99 and failed transactions come from the clients' own
// records (pgbench's transaction logs, sysbench's report and histogram);
// cancels from the controllers' own records (the guard's decisions, the
// ptkill loop's or pt-kill's kills, the culprit's and the clients' cancel
// errors under timeout). Rows are normalized by the same case run without
// culprit and without control in the same invocation. Options.Rounds
// repeats every case's runs, interleaved, and pools each row's rounds;
// one unmeasured run follows the table's set-up. Options.NoCulprit runs
// every controller with nothing wrong, and Options.GuardAudit receives
// the guard's decisions of every run.
package dbsuite

// Package dbsuite is moirai's database bench suite (suite "postgres"):
// real servers, real clients. pgbench runs the victims (short updates and
// reads of a hot set of rows, closed loop or open loop with -R) and logs
// every transaction (-l); the case's culprit runs on its own sessions
// (application_name "dbsuite-culprit") once the warm-up is over; the
// controller is none, timeout (statement_timeout and lock_timeout on every
// session), ptkill (pt-kill's --busy-time/--victims oldest/--kill-query rule
// as a SQL loop) or guard (moirai guard in-process with guard/postgres).
//
// Throughput, p99 and failed transactions come from pgbench's own
// transaction logs; cancels from the controllers' own records (the guard's
// decisions, the ptkill loop's cancels, the culprit's and the clients'
// cancel errors under timeout). Rows are normalized by the same case run
// without culprit and without control in the same invocation.
package dbsuite

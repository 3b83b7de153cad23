package mysql

import (
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/guard"
)

// ProcRow is one scanned PROCESSLIST row.
type ProcRow struct {
	ID                      sql.NullInt64
	User, Host, DB, Command sql.NullString
	TimeMS                  sql.NullFloat64
	State, Info             sql.NullString
	Stage, MaxStage         sql.NullInt64
	Progress                sql.NullFloat64
	QueryID                 sql.NullInt64
}

var commands = map[string]bool{
	"Sleep": true, "Query": true, "Connect": true, "Quit": true, "Init DB": true,
	"Field List": true, "Create DB": true, "Drop DB": true, "Refresh": true, "Shutdown": true,
	"Statistics": true, "Processlist": true, "Kill": true, "Debug": true, "Ping": true,
	"Time": true, "Delayed insert": true, "Change user": true, "Binlog Dump": true,
	"Table Dump": true, "Connect Out": true, "Register Slave": true, "Prepare": true,
	"Execute": true, "Long Data": true, "Close stmt": true, "Reset stmt": true,
	"Set option": true, "Fetch": true, "Daemon": true, "Reset connection": true,
	"Slave_IO": true, "Slave_SQL": true, "Slave_worker": true, "Bulk_execute": true,
}

// ParseSession turns one PROCESSLIST row into a session; ok is false when
// the row must be skipped.
func ParseSession(r ProcRow, now time.Time) (guard.Session, bool) {
	var s guard.Session
	if !r.ID.Valid || r.ID.Int64 <= 0 || !r.Command.Valid || !r.TimeMS.Valid || !(r.TimeMS.Float64 >= 0 && r.TimeMS.Float64 < 1e12) || !r.QueryID.Valid || r.QueryID.Int64 < 0 {
		return s, false
	}
	if !commands[r.Command.String] {
		return s, false
	}
	s.ID = r.ID.Int64
	s.Statement = r.QueryID.Int64
	s.User, s.Database, s.ClientAddr = r.User.String, r.DB.String, r.Host.String
	s.State = r.Command.String
	s.Kind = "client"
	switch {
	case r.User.String == "system user":
		s.Kind = "system user"
	case r.User.String == "event_scheduler" || r.Command.String == "Daemon":
		s.Kind = "event scheduler"
		if r.Command.String == "Daemon" && r.User.String != "event_scheduler" {
			s.Kind = "daemon"
		}
	case strings.HasPrefix(r.Command.String, "Binlog Dump") || strings.HasPrefix(r.Command.String, "Slave_"):
		s.Kind = "replication"
	}
	s.Active = r.Command.String != "Sleep" && r.Command.String != "Daemon" && r.Info.Valid
	s.Query = r.Info.String
	if s.Query != "" {
		s.Fingerprint = guard.Fingerprint(s.Query)
	}
	s.Age = time.Duration(r.TimeMS.Float64 * float64(time.Millisecond))
	if s.Active {
		s.QueryStart = now.Add(-s.Age)
	}
	s.StateChange = now.Add(-s.Age)
	st := r.State.String
	if isWaitState(st) {
		s.WaitEvent = st
	}
	s.Running = s.Active && s.WaitEvent == "" && st != "User sleep" && st != "User lock"
	if r.MaxStage.Valid && r.MaxStage.Int64 > 0 && r.Progress.Valid && r.Progress.Float64 >= 0 {
		s.Total = 1000
		s.Done = int64(r.Progress.Float64 * 10)
	}
	return s, true
}

func isWaitState(st string) bool {
	return strings.HasPrefix(st, "Waiting for") || st == "Locked"
}

// TrxRow is one scanned INNODB_TRX row.
type TrxRow struct {
	ID          sql.NullString
	Thread      sql.NullInt64
	Started     sql.NullTime
	State       sql.NullString
	RowsLocked  sql.NullInt64
	WaitStarted sql.NullTime
}

// Trx is a parsed INNODB_TRX row.
type Trx struct {
	ID          string // "0" for a transaction InnoDB gave no id (see noID)
	Thread      int64
	Started     time.Time
	State       string
	WaitStarted time.Time
	RowsLocked  int64
}

// noID is the trx_id INNODB_TRX shows for a transaction that has not
// written: one that only took locking reads (LOCK IN SHARE MODE) holds
// its row locks under it, and so may several at once.
const noID = "0"

// ParseTrx parses one INNODB_TRX row.
func ParseTrx(r TrxRow) (Trx, bool) {
	if !r.ID.Valid || r.ID.String == "" || !r.Thread.Valid || r.Thread.Int64 <= 0 || !r.Started.Valid || !r.State.Valid {
		return Trx{}, false
	}
	switch r.State.String {
	case "RUNNING", "LOCK WAIT", "ROLLING BACK", "COMMITTING":
	default:
		return Trx{}, false
	}
	t := Trx{ID: r.ID.String, Thread: r.Thread.Int64, Started: r.Started.Time, State: r.State.String}
	if r.RowsLocked.Valid {
		t.RowsLocked = r.RowsLocked.Int64
	}
	if r.WaitStarted.Valid {
		t.WaitStarted = r.WaitStarted.Time
	}
	return t, true
}

// WaitRow is one INNODB_LOCK_WAITS row joined with the requested lock's
// INNODB_LOCKS row.
type WaitRow struct {
	Requesting, Blocking, LockID sql.NullString
	Mode, Type, Table            sql.NullString
}

// Wait is a parsed lock wait.
type Wait struct {
	Requesting, Blocking string
	Resource, Mode       string
	Table                string // db.table
}

// ParseWait parses one lock wait row; the lock id must be
// "trx:space:page:rec" (record: the resource is "row:db.table/space:page:rec")
// or "trx:table" (table: "relation:db.table").
func ParseWait(r WaitRow) (Wait, bool) {
	if !r.Requesting.Valid || !r.Blocking.Valid || !r.LockID.Valid || !r.Type.Valid || !r.Table.Valid || r.Table.String == "" {
		return Wait{}, false
	}
	parts := strings.Split(r.LockID.String, ":")
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return Wait{}, false
		}
	}
	table := strings.ReplaceAll(r.Table.String, "`", "")
	w := Wait{Requesting: r.Requesting.String, Blocking: r.Blocking.String, Mode: r.Mode.String, Table: table}
	switch {
	case r.Type.String == "RECORD" && len(parts) == 4:
		// The record (space, page, heap number): the waiters of one row
		// wait for one resource, and two hot rows of a table are two (a
		// decision on one is no episode of the other).
		w.Resource = "row:" + table + "/" + strings.Join(parts[1:], ":")
	case r.Type.String == "TABLE" && len(parts) == 2:
		w.Resource = "relation:" + table
	default:
		return Wait{}, false
	}
	return w, true
}

// MDL is one granted metadata lock on a table.
type MDL struct {
	Session int64
	Mode    string
	Table   string // db.table
}

// ParseMDL parses one metadata lock row (thread, mode, schema, table); ok
// is false for rows that are not table locks or have NULLs.
func ParseMDL(thread sql.NullInt64, mode, schema, table sql.NullString) (MDL, bool) {
	if !thread.Valid || thread.Int64 <= 0 || !mode.Valid || !schema.Valid || !table.Valid || schema.String == "" || table.String == "" {
		return MDL{}, false
	}
	return MDL{Session: thread.Int64, Mode: mode.String, Table: schema.String + "." + table.String}, true
}

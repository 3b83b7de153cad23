package mysql

import (
	"database/sql"
	"testing"
	"time"
)

// FuzzBuild feeds hostile rows to the parsing of the views: NULLs,
// negative or huge TIME_MS, unknown commands and states, lock waits
// naming unknown transactions or a thread waiting for itself. It must
// never panic, never report a use of a thread it does not list, and never
// blame a thread for its own wait.
func FuzzBuild(f *testing.F) {
	f.Add(int64(11), "Query", 1500.0, "User sleep", "update t set v = 1", int64(12), "Waiting for backup lock", "flush tables with read lock", "1", "2", "`test`.`t`", true)
	f.Add(int64(0), "", -5.0, "", "", int64(-1), "Waiting for table metadata lock", "alter table t add c int", "", "", "", false)
	f.Fuzz(func(t *testing.T, id int64, cmd string, ms float64, state, info string, id2 int64, state2, info2, trx1, trx2, table string, valid bool) {
		at := time.Unix(1e9, 0)
		threads := []threadRow{
			{id: sql.NullInt64{Int64: id, Valid: valid}, command: sql.NullString{String: cmd, Valid: true}, timeMS: sql.NullFloat64{Float64: ms, Valid: true},
				state: sql.NullString{String: state, Valid: true}, info: sql.NullString{String: info, Valid: true}, queryID: sql.NullInt64{Int64: id2, Valid: true}},
			{id: sql.NullInt64{Int64: id2, Valid: true}, command: sql.NullString{String: "Query", Valid: true}, timeMS: sql.NullFloat64{Float64: ms / 2, Valid: valid},
				state: sql.NullString{String: state2, Valid: true}, info: sql.NullString{String: info2, Valid: valid}},
		}
		trxs := []trxRow{
			{id: sql.NullString{String: trx1, Valid: true}, thread: sql.NullInt64{Int64: id, Valid: true}, started: sql.NullTime{Time: at.Add(-time.Second), Valid: valid}},
			{id: sql.NullString{String: trx2, Valid: valid}, thread: sql.NullInt64{Int64: id2, Valid: true}},
		}
		waits := []waitRow{
			{requesting: sql.NullString{String: trx1, Valid: true}, blocking: sql.NullString{String: trx2, Valid: true}, table: sql.NullString{String: table, Valid: valid}},
			{requesting: sql.NullString{String: trx2, Valid: true}, blocking: sql.NullString{String: trx1, Valid: true}},
		}
		mdls := []mdlRow{{thread: sql.NullInt64{Int64: id, Valid: true}, schema: sql.NullString{String: "test", Valid: true}, table: sql.NullString{String: table, Valid: true}}}
		obs := build(at, 99, threads, trxs, waits, mdls)
		ids := map[int64]bool{}
		for _, s := range obs.Sessions {
			if ids[s.ID] {
				t.Fatalf("thread %d twice", s.ID)
			}
			ids[s.ID] = true
			if s.Age < 0 {
				t.Fatalf("negative age %v", s.Age)
			}
		}
		for _, u := range obs.Uses {
			if !ids[u.Session] {
				t.Fatalf("use of unlisted thread %d", u.Session)
			}
			for _, b := range u.BlockedBy {
				if b == u.Session {
					t.Fatalf("thread %d blamed for its own wait", b)
				}
			}
		}
	})
}

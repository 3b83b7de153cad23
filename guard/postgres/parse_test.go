package postgres

import (
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// FuzzBuild feeds hostile rows to the parsing of the views: NULLs, unknown
// states and lock types, pids that are not in pg_stat_activity, blocking
// cycles. It must never panic, never report a use of a session it does
// not list, and never blame a session for its own wait.
func FuzzBuild(f *testing.F) {
	f.Add(int32(10), "active", "relation", "ExclusiveLock", true, "public.t", int32(11), int32(10), false, true)
	f.Add(int32(0), "", "tuple", "", false, "", int32(-1), int32(0), true, false)
	f.Add(int32(7), "idle in transaction", "transactionid", "ShareLock", false, "42", int32(7), int32(8), false, false)
	f.Fuzz(func(t *testing.T, pid int32, state, lockType, mode string, granted bool, rel string, blocker, other int32, nullPID, nullState bool) {
		at := time.Unix(1e9, 0)
		acts := []activityRow{
			{pid: ptr(pid), state: ptr(state), query: ptr("UPDATE t SET v = 1"), queryStart: ptr(at.Add(-time.Second)), backendType: ptr("client backend")},
			{pid: ptr(other), state: ptr("active"), xactStart: ptr(at)},
		}
		if nullPID {
			acts[0].pid = nil
		}
		if nullState {
			acts[1].state = nil
		}
		locks := []lockRow{
			{pid: ptr(pid), lockType: ptr(lockType), mode: ptr(mode), granted: ptr(granted), relation: ptr(rel), xid: ptr(rel), objid: ptr(rel), blockers: []int32{blocker, other},
				db: ptr("db"), classid: ptr(rel), objsubid: ptr("1"), page: ptr("0"), tuple: ptr(rel)},
			{pid: ptr(other), lockType: ptr(lockType), granted: ptr(!granted), relation: ptr(rel), xid: ptr(rel), objid: ptr(rel), blockers: []int32{pid}, db: ptr("db")},
			{pid: ptr(blocker), lockType: nil, granted: nil},
		}
		progress := []progressRow{{pid: ptr(pid), done: ptr(int64(other)), total: ptr(int64(blocker))}}
		obs := build(at, acts, locks, progress)
		ids := map[int64]bool{}
		for _, s := range obs.Sessions {
			if ids[s.ID] {
				t.Fatalf("session %d twice", s.ID)
			}
			ids[s.ID] = true
			if s.Done < 0 || s.Done > s.Total && s.Total > 0 {
				t.Fatalf("progress %d/%d", s.Done, s.Total)
			}
		}
		for _, u := range obs.Uses {
			if !ids[u.Session] {
				t.Fatalf("use of unlisted session %d", u.Session)
			}
			for _, b := range u.BlockedBy {
				if b == u.Session {
					t.Fatalf("session %d blamed for its own wait", b)
				}
			}
		}
	})
}

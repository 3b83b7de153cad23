package bench

import (
	"testing"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// oracleSnap is a snapshot of a lock and a Memory, a culprit (ID 1) and
// a light task (ID 2): the culprit holds the lock and has evicted
// evictions units from the Memory and begun own waits on it (it misses
// too); the light task has begun lockWaits waits on the lock and
// memWaits on the Memory. The resources' waits are the sums.
func oracleSnap(evictions, own, lockWaits, memWaits int64) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Resources: []snapshot.Resource{
			{Name: "table", Kind: resource.KindLock, Capacity: 1, Waits: lockWaits},
			{Name: "cache", Kind: resource.KindMemory, Capacity: 100, Waits: own + memWaits},
		},
		Tasks: []snapshot.Task{
			{ID: 1, Class: culpritClass, Cancellable: true, First: 0, N: 2},
			{ID: 2, Class: "light", Cancellable: true, First: 2, N: 2},
		},
		Usage: []snapshot.Usage{
			{Usage: task.Usage{Held: 1}, Task: 0, Res: 0},
			{Usage: task.Usage{Held: 40, Evictions: evictions, Waits: own}, Task: 0, Res: 1},
			{Usage: task.Usage{Waits: lockWaits}, Task: 1, Res: 0},
			{Usage: task.Usage{Waits: memWaits}, Task: 1, Res: 1},
		},
	}
}

// The evidence oracle cancels the culprit only once another task has
// begun to wait, since its last step, on a lock the culprit holds or in a
// Memory it has evicted from (the culprit's own misses are no evidence);
// the oracle cancels it at once.
func TestOracleEvidence(t *testing.T) {
	for _, tc := range []struct {
		evictions, own, lockWaits, memWaits int64
		want                                bool
	}{
		{0, 0, 0, 0, false},
		{5, 3, 0, 0, false}, // the culprit's own misses
		{0, 0, 0, 2, false}, // misses in a Memory the culprit pushed nothing out of
		{5, 3, 0, 1, true},
		{0, 0, 1, 0, true},
	} {
		o := &oracleEvidence{}
		if d := o.Decide(oracleSnap(0, 0, 0, 0)); d != nil {
			t.Fatalf("first step: %+v; want nothing (no step before to count from)", d)
		}
		s := oracleSnap(tc.evictions, tc.own, tc.lockWaits, tc.memWaits)
		got := o.Decide(s)
		if (len(got) == 1 && got[0].Task == 1 && got[0].Action == policy.Cancel) != tc.want || len(got) > 1 {
			t.Errorf("%+v: %+v; want a cancellation of the culprit: %v", tc, got, tc.want)
		}
		if d := o.Decide(s); d != nil {
			t.Errorf("%+v, a step later with no new wait: %+v; want nothing", tc, d)
		}
		if d := (oracle{}).Decide(s); len(d) != 1 || d[0].Task != 1 {
			t.Errorf("oracle, %+v: %+v; want the culprit cancelled", tc, d)
		}
	}
}

package resource

import "testing"

// The tasks two cores run at once have IDs a run of the registry apart
// (64 IDs per P): their holder slots must differ, as consecutive IDs'
// mostly do, or the two cores take turns at one slot.
func TestSlotIndexSpreadsIDsARunApart(t *testing.T) {
	const run = 64
	same, consecutive := 0, 0
	for id := uint64(1); id <= 10_000; id++ {
		if slotIndex(id) >= nSlots {
			t.Fatalf("slotIndex(%d) = %d, out of %d slots", id, slotIndex(id), nSlots)
		}
		if slotIndex(id) == slotIndex(id+run) {
			same++
		}
		if slotIndex(id) == slotIndex(id+1) {
			consecutive++
		}
	}
	if same > 0 || consecutive > 10_000/nSlots {
		t.Errorf("of 10,000 IDs, %d share a slot with the ID a run later, %d with the next; want 0 and at most a fair share", same, consecutive)
	}
}

package penalty

import (
	"fmt"
	"testing"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// TestClassesBounded: the lengths remembered per class are bounded by
// MaxClasses, whatever classes requests bring; past the cap a class is
// not remembered, and counted.
func TestClassesBounded(t *testing.T) {
	p := New()
	vt := &snapshot.Task{ID: 1 << 40, Exec: 100 * time.Millisecond}
	for i := range MaxClasses + 500 {
		nt := &snapshot.Task{ID: uint64(i), Class: fmt.Sprintf("GET /users/%d", i), Exec: 10 * time.Millisecond}
		p.tasks[nt.ID] = &record{}
		p.next(nt, vt, 50*time.Millisecond, 1, time.Second)
	}
	if len(p.classes) != MaxClasses || p.Stats().ClassesDropped != 500 {
		t.Errorf("%d classes remembered, %d dropped; want %d and 500", len(p.classes), p.Stats().ClassesDropped, MaxClasses)
	}
}

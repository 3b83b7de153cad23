package snapshot_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample is a snapshot as a policy sees it: a culprit holding a table lock,
// two inserts waiting for it, and a reader of a buffer pool.
func sample() *snapshot.Snapshot {
	u := func(ti, ri int32, held int64, hold, wait time.Duration, waiting int32) snapshot.Usage {
		return snapshot.Usage{Task: ti, Res: ri, Usage: task.Usage{
			Resource: task.ResourceID(ri + 1), Held: held, Hold: hold, Wait: wait, Waiting: waiting,
		}}
	}
	return &snapshot.Snapshot{
		Window: 100 * time.Millisecond,
		Tasks: []snapshot.Task{
			{ID: 7, Class: "select-for-update", Cancellable: true, Done: 30, Total: 120, First: 0, N: 2},
			{ID: 8, Class: "insert", First: 2, N: 1},
			{ID: 9, Class: "insert", First: 3, N: 1},
		},
		Resources: []snapshot.Resource{
			{ID: 1, Name: "table:orders", Kind: resource.KindLock},
			{ID: 2, Name: "buffer-pool", Kind: resource.KindMemory, Capacity: 1024},
		},
		Usage: []snapshot.Usage{
			u(0, 0, 1, 2*time.Second, 0, 0),
			u(0, 1, 300, time.Second, 0, 0),
			u(1, 0, 0, 0, 800*time.Millisecond, 1),
			u(2, 0, 0, 0, 400*time.Millisecond, 1),
		},
		Completed: snapshot.Completions{Ended: 50},
	}
}

func TestLookups(t *testing.T) {
	s := sample()
	if got := s.TaskByID(8); got != 1 {
		t.Errorf("TaskByID(8) = %d, want 1", got)
	}
	if got := s.TaskByID(99); got != -1 {
		t.Errorf("TaskByID(99) = %d, want -1", got)
	}
	if got := s.ResourceByName("buffer-pool"); got != 1 {
		t.Errorf("ResourceByName = %d, want 1", got)
	}
	if got := s.ResourceByName("nope"); got != -1 {
		t.Errorf("ResourceByName(nope) = %d, want -1", got)
	}
	holders, waiters := s.Holders(0)
	if diff := cmp.Diff([]int{0}, holders); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, waiters); diff != "" {
		t.Errorf("waiters (-want +got):\n%s", diff)
	}
	if got := len(s.UsageOf(0)); got != 2 {
		t.Errorf("UsageOf(0) has %d entries, want 2", got)
	}
	if p, ok := s.Tasks[0].Progress(); !ok || p != 0.25 {
		t.Errorf("Progress = %v, %v; want 0.25, true", p, ok)
	}
	if _, ok := s.Tasks[1].Progress(); ok {
		t.Error("a task without progress reported some")
	}
	if got := s.Completed.Throughput(s.Window); got != 500 {
		t.Errorf("Throughput = %v, want 500/s", got)
	}
	if got := s.Completed.Throughput(0); got != 0 {
		t.Errorf("Throughput over no window = %v", got)
	}
}

func TestResetKeepsStorage(t *testing.T) {
	s := sample()
	tasks := cap(s.Tasks)
	s.Reset()
	if len(s.Tasks)+len(s.Resources)+len(s.Usage) != 0 || s.Window != 0 || s.Completed.Ended != 0 {
		t.Errorf("Reset left data: %+v", s)
	}
	if cap(s.Tasks) != tasks {
		t.Error("Reset dropped the storage")
	}
}

// A policy reads a snapshot: here, who blocks the most waiting time.
func ExampleSnapshot() {
	s := sample()
	ri := s.ResourceByName("table:orders")
	holders, waiters := s.Holders(ri)
	var blocked time.Duration
	for _, i := range waiters {
		for _, u := range s.UsageOf(i) {
			if int(u.Res) == ri {
				blocked += u.Wait
			}
		}
	}
	for _, i := range holders {
		fmt.Printf("task %d (%s) blocks %d tasks for %v\n", s.Tasks[i].ID, s.Tasks[i].Class, len(waiters), blocked)
	}
	// Output: task 7 (select-for-update) blocks 2 tasks for 1.2s
}

func ExampleTask() {
	s := sample()
	t := s.Tasks[0]
	p, _ := t.Progress()
	fmt.Println(t.ID, t.Class, t.Cancellable, p)
	// Output: 7 select-for-update true 0.25
}

func ExampleUsage() {
	s := sample()
	for _, u := range s.UsageOf(0) {
		fmt.Println(s.Resources[u.Res].Name, u.Held, u.Hold)
	}
	// Output:
	// table:orders 1 2s
	// buffer-pool 300 1s
}

func ExampleResource() {
	r := sample().Resources[1]
	fmt.Println(r.Name, r.Kind, r.Capacity)
	// Output: buffer-pool memory 1024
}

func ExampleCompletions() {
	s := sample()
	fmt.Println(s.Completed.Throughput(s.Window), "tasks/s")
	// Output: 500 tasks/s
}

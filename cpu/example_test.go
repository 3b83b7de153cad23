package cpu_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/cpu"
)

func ExampleReadBudget() {
	// A fake machine of 4 CPUs whose service's parent cgroup has a
	// quota of 150 ms per 100 ms period (os.DirFS("/") reads the real one).
	b := cpu.ReadBudget(os.DirFS("testdata/v2"))
	fmt.Println(b)
	for _, s := range b.Steps {
		if s.CPUs > 0 && s.Source == "cgroup v2" {
			fmt.Printf("%s: %s\n", s.File, s.Value)
		}
	}
	// Output:
	// 1.5 CPUs (cgroup quota; host 4, affinity 4)
	// sys/fs/cgroup/app/cpu.max: 150000 100000
}

func ExampleActive() {
	// A process that used a third of the host's busy CPU time, on a
	// budget of 4 CPUs.
	for _, o := range []float64{1, 1.5, 2} {
		fmt.Printf("O=%v: %d workers\n", o, cpu.Active(o, 1.0/3, 4, cpu.Limit(o, 4)))
	}
	// Output:
	// O=1: 2 workers
	// O=1.5: 2 workers
	// O=2: 3 workers
}

func ExampleNewPool() {
	// A neighbour-aware pool is cpu.NewPool() (the budget, the clock tick
	// and /proc read from the machine); a static one is easier to show.
	pool, err := cpu.NewPool(cpu.WithFixed(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	var mu sync.Mutex
	sum := 0
	for i := 1; i <= 10; i++ {
		pool.Go(context.Background(), func(ctx context.Context) {
			mu.Lock()
			sum += i
			mu.Unlock()
		})
	}
	err = pool.Submit(context.Background(), func(ctx context.Context) error {
		return nil // runs in the caller's goroutine once a worker is free
	})
	pool.Close() // waits for the work queued by Go
	fmt.Println(sum, err, pool.Stats().Limit)
	// Output: 55 <nil> 2
}

// TestPoolQueueResource: with WithQueue, work waiting for a worker is a
// wait on the controller's Queue resource, charged to the task in the
// work's context.
func TestPoolQueueResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New()
		defer ctl.Close()
		q := ctl.Queue("cpu:workers", 8, 0)
		pool, err := cpu.NewPool(cpu.WithFixed(1), cpu.WithQueue(q))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if q.Slots() != 1 {
			t.Fatalf("queue of %d slots, want the pool's 1", q.Slots())
		}
		release := make(chan struct{})
		pool.Go(context.Background(), func(context.Context) { <-release })
		synctest.Wait()

		ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "report"})
		done := make(chan error)
		go func() {
			done <- pool.Submit(ctx, func(context.Context) error { return nil })
		}()
		synctest.Wait()
		if n := q.Resource().QueueLength(); n != 1 {
			t.Errorf("queue length %d while the task waits, want 1", n)
		}
		time.Sleep(20 * time.Millisecond)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		task.End(nil)
		if tot := q.Resource().EndedTotals(); tot.Waits != 1 || tot.Wait < 15*time.Millisecond { // the controller's clock is coarse
			t.Errorf("ended totals %+v: want the task's 20ms wait", tot)
		}
	})
}

// Submit runs work in the caller's goroutine once one of the pool's
// workers is free; Stats says how the pool is sized.
func ExamplePool() {
	pool, err := cpu.NewPool(cpu.WithFixed(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	err = pool.Submit(context.Background(), func(ctx context.Context) error {
		return nil // CPU-bound work, checking ctx now and then
	})
	st := pool.Stats()
	fmt.Println(err, st.Limit, st.Active)
	// Output: <nil> 2 2
}

// A Budget says how many CPUs the process has and how that was derived.
func ExampleBudget() {
	b := cpu.ReadBudget(os.DirFS("testdata/v2"))
	fmt.Println(b.CPUs, b.Host, b.Affinity, b.Limit, b.Cgroup)
	// Output: 1.5 4 4 cgroup quota v2
}

// Each line of /proc/self/cgroup: hierarchy, controllers, path.
func ExampleCgroup() {
	cgs, err := cpu.ParseCgroup([]byte("12:cpu,cpuacct:/kubepods/pod1\n0::/system.slice/app.service\n"))
	fmt.Println(err)
	for _, c := range cgs {
		fmt.Println(c.ID, c.Controllers, c.Path)
	}
	// Output:
	// <nil>
	// 12 [cpu cpuacct] /kubepods/pod1
	// 0 [] /system.slice/app.service
}

// Each line of /proc/self/mountinfo that matters: what is mounted where.
func ExampleMount() {
	ms, err := cpu.ParseMountinfo([]byte("30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"))
	fmt.Println(err, len(ms), ms[0].Point, ms[0].FSType, ms[0].Root)
	// Output: <nil> 1 /sys/fs/cgroup cgroup2 /
}

// Steps record every source ReadBudget consulted and why it was used or
// not.
func ExampleStep() {
	b := cpu.ReadBudget(os.DirFS("testdata/v2"))
	for _, s := range b.Steps {
		if s.Source == "cgroup v2" && s.CPUs > 0 {
			fmt.Println(s.Source, s.File, s.CPUs)
		}
	}
	// Output: cgroup v2 sys/fs/cgroup/app/cpu.max 1.5
}

// host is a Reader of a host where this process used a quarter of the
// busy CPU time: 10 ms of its own out of 40 ms busy per tick.
type host struct{ n time.Duration }

func (h *host) Read() (cpu.Sample, error) {
	h.n++
	return cpu.Sample{Self: h.n * 10 * time.Millisecond, Busy: h.n * 40 * time.Millisecond}, nil
}

// A Reader gives the pool its two counters (NewProcReader reads /proc; a
// test or another platform supplies its own with WithReader). Between two
// samples the process's share of the busy CPU time sizes the pool.
func ExampleReader() {
	var r cpu.Reader = &host{}
	a, _ := r.Read()
	b, _ := r.Read()
	share := float64(b.Self-a.Self) / float64(b.Busy-a.Busy)
	fmt.Printf("share %.2f: %d of 4 workers\n", share, cpu.Active(1, share, 4, cpu.Limit(1, 4)))
	// Output: share 0.25: 1 of 4 workers
}

// Options set the budget (else read from the machine), the overcommit
// factor, the tolerance, and how much work may wait.
func ExampleOption() {
	pool, err := cpu.NewPool(cpu.WithBudget(3), cpu.WithOvercommit(1.5), cpu.WithTolerance(0.5), cpu.WithBacklog(100))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	st := pool.Stats()
	fmt.Println(st.CPUs, st.Overcommit, st.Limit)
	// Output: 3 1.5 5
}

// ProcReader reads the real counters: this process's CPU time and the
// host's busy time.
func ExampleProcReader() {
	r, err := cpu.NewProcReader("/")
	if err != nil {
		fmt.Println("no /proc here:", err)
		return
	}
	defer r.Close()
	s, err := r.Read()
	fmt.Println(err == nil && s.Self <= s.Busy)
	// Output: true
}

// A Sample is two cumulative counters; the pool works on their changes.
func ExampleSample() {
	a := cpu.Sample{Self: 1 * time.Second, Busy: 8 * time.Second}
	b := cpu.Sample{Self: 1500 * time.Millisecond, Busy: 10 * time.Second}
	fmt.Printf("%.2f\n", float64(b.Self-a.Self)/float64(b.Busy-a.Busy))
	// Output: 0.25
}

// Stats is the pool's sizing and counters.
func ExampleStats() {
	pool, _ := cpu.NewPool(cpu.WithFixed(2))
	defer pool.Close()
	_ = pool.Submit(context.Background(), func(context.Context) error { return nil })
	st := pool.Stats()
	fmt.Println(st.Limit, st.Active, st.Running, st.Waiting, st.Dropped)
	// Output: 2 2 0 0 0
}

// StepInfo is what an observer sees at each tick of a neighbour-aware
// pool's loop: the sample, the share and the active count it chose.
func ExampleStepInfo() {
	pool, err := cpu.NewPool(cpu.WithObserver(func(si cpu.StepInfo) {
		if si.Err != nil {
			log.Printf("cpu: read failed: %v (keeping %d workers)", si.Err, si.Active)
		}
	}))
	if err != nil {
		log.Print(err)
		return
	}
	defer pool.Close()
}

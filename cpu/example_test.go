package cpu_test

import (
	"context"
	"fmt"
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

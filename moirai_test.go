package moirai_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// policyFunc adapts a function to policy.Policy.
type policyFunc struct {
	name string
	fn   func(*snapshot.Snapshot) []policy.Decision
}

func (p policyFunc) Name() string                                  { return p.name }
func (p policyFunc) Decide(s *snapshot.Snapshot) []policy.Decision { return p.fn(s) }

// detectorFunc adapts a function to policy.Detector.
type detectorFunc struct {
	name string
	fn   func(*snapshot.Snapshot) (bool, string)
}

func (d detectorFunc) Name() string                               { return d.name }
func (d detectorFunc) Detect(s *snapshot.Snapshot) (bool, string) { return d.fn(s) }

// errs collects reported errors.
type errs struct {
	mu   sync.Mutex
	list []error
}

func (e *errs) add(err error) { e.mu.Lock(); e.list = append(e.list, err); e.mu.Unlock() }
func (e *errs) all() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.list...)
}

// TestSnapshotSeesSemaphoreHolders: the two holders of one unit each of a
// controller's 2-unit semaphore are named in the semaphore (one in its
// units word, one in a holder slot), not in their accounting; a snapshot
// shows both, with their holds in progress, and not the unit the slot
// keeps after the release.
func TestSnapshotSeesSemaphoreHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New()
		defer ctl.Close()
		s := ctl.Semaphore("pool", 2)
		actx, a := ctl.Begin(context.Background(), moirai.Spec{Class: "a"})
		defer a.End(nil)
		bctx, b := ctl.Begin(context.Background(), moirai.Spec{Class: "b"})
		defer b.End(nil)
		pa, err := s.Acquire(actx, 1)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		pb, err := s.Acquire(bctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()

		snap := ctl.Snapshot()
		ri := snap.ResourceByName("pool")
		if ri < 0 {
			t.Fatal("resource missing from snapshot")
		}
		if r := snap.Resources[ri]; r.Holders != 2 || r.Held != 2 {
			t.Errorf("resource: holders %d held %d, want 2, 2", r.Holders, r.Held)
		}
		holders, _ := snap.Holders(ri)
		want := map[uint64]time.Duration{a.ID(): 300 * time.Millisecond, b.ID(): 200 * time.Millisecond}
		if len(holders) != 2 {
			t.Fatalf("holders = %v, want tasks %d and %d", holders, a.ID(), b.ID())
		}
		for _, i := range holders {
			d, ok := want[snap.Tasks[i].ID]
			if !ok {
				t.Errorf("holder %d, want %d or %d", snap.Tasks[i].ID, a.ID(), b.ID())
				continue
			}
			for _, u := range snap.UsageOf(i) {
				if u.Held != 1 || u.Hold < d-10*time.Millisecond || u.Hold > d+10*time.Millisecond {
					t.Errorf("task %d usage %+v, want 1 held for about %v", snap.Tasks[i].ID, u, d)
				}
			}
		}

		if err := pb.Release(); err != nil { // b's slot keeps the unit
			t.Fatal(err)
		}
		snap = ctl.Snapshot()
		if r := snap.Resources[ri]; r.Holders != 1 || r.Held != 1 {
			t.Errorf("after b's release: holders %d held %d, want 1, 1", r.Holders, r.Held)
		}
		if got := s.InUse(); got != 1 {
			t.Errorf("InUse = %d after b's release, want 1", got)
		}
		if err := pa.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSnapshotSeesHoldersAndWaiters checks that a snapshot shows who holds
// a lock, who waits for it, and for how long.
func TestSnapshotSeesHoldersAndWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New()
		defer ctl.Close()
		mu := ctl.Mutex("table:orders")

		hctx, holder := ctl.Begin(context.Background(), moirai.Spec{Class: "select-for-update", Key: "conn-1", Cancellable: true})
		if err := mu.Lock(hctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var waiters []*moirai.Task
		for range 3 {
			wctx, w := ctl.Begin(context.Background(), moirai.Spec{Class: "insert"})
			waiters = append(waiters, w)
			wg.Go(func() {
				if err := mu.Lock(wctx); err != nil {
					t.Error(err)
					return
				}
				mu.Unlock()
			})
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()

		s := ctl.Snapshot()
		ri := s.ResourceByName("table:orders")
		if ri < 0 {
			t.Fatal("resource missing from snapshot")
		}
		r := s.Resources[ri]
		if r.Holders != 1 || r.Waiters != 3 || r.Held != 1 {
			t.Errorf("resource: holders %d waiters %d held %d, want 1, 3, 1", r.Holders, r.Waiters, r.Held)
		}
		holders, waiting := s.Holders(ri)
		if len(holders) != 1 || s.Tasks[holders[0]].ID != holder.ID() {
			t.Errorf("holders = %v, want task %d", holders, holder.ID())
		}
		if len(waiting) != 3 {
			t.Errorf("waiters = %v, want 3", waiting)
		}
		for _, u := range s.UsageOf(holders[0]) {
			if u.Hold < 450*time.Millisecond {
				t.Errorf("holder's hold = %v, want about 500ms", u.Hold)
			}
		}
		for _, i := range waiting {
			for _, u := range s.UsageOf(i) {
				if u.Waiting != 1 || u.Wait < 450*time.Millisecond {
					t.Errorf("waiter usage = %+v, want a wait of about 500ms in progress", u)
				}
			}
		}

		mu.Unlock()
		wg.Wait()
		holder.End(nil)
		for _, w := range waiters {
			w.End(nil)
		}
		s = ctl.Snapshot()
		if len(s.Tasks) != 0 {
			t.Errorf("%d tasks live after End", len(s.Tasks))
		}
		r = s.Resources[ri]
		if r.Holders != 0 || r.Waiters != 0 || r.Wait < 3*450*time.Millisecond || r.Hold < 450*time.Millisecond {
			t.Errorf("resource totals after End = %+v", r)
		}
	})
}

// TestPolicyCancelsThroughTheApplicationsPath checks the whole act path: a
// policy's decision cancels the task's context with ErrCancelled, runs its
// OnCancel hook, and is recorded; the safety rules refuse what they must.
func TestPolicyCancelsThroughTheApplicationsPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var targets []uint64
		p := policyFunc{name: "test", fn: func(s *snapshot.Snapshot) []policy.Decision {
			mu.Lock()
			defer mu.Unlock()
			var ds []policy.Decision
			for _, id := range targets {
				ds = append(ds, policy.Decision{Action: policy.Cancel, Task: id, Reason: "test decided"})
			}
			targets = nil
			return ds
		}}
		ctl := moirai.New(moirai.WithPolicy(p), moirai.WithMinCancelInterval(time.Second))
		defer ctl.Close()

		culpritCtx, culprit := ctl.Begin(context.Background(), moirai.Spec{Class: "dump", Cancellable: true})
		hooked := make(chan struct{})
		culprit.OnCancel(func() { close(hooked) })
		_, victim := ctl.Begin(context.Background(), moirai.Spec{Class: "insert"}) // not cancellable
		_, other := ctl.Begin(context.Background(), moirai.Spec{Class: "dump", Cancellable: true})

		mu.Lock()
		targets = []uint64{culprit.ID(), victim.ID(), culprit.ID(), other.ID()}
		mu.Unlock()
		time.Sleep(150 * time.Millisecond) // one coarse tick
		synctest.Wait()

		<-hooked
		if err := context.Cause(culpritCtx); !errors.Is(err, moirai.ErrCancelled) || !strings.Contains(err.Error(), "test decided") {
			t.Errorf("cause = %v, want ErrCancelled with the reason", err)
		}
		if culpritCtx.Err() != context.Canceled {
			t.Errorf("Err = %v, want context.Canceled", culpritCtx.Err())
		}
		if victim.Cancelled() || other.Cancelled() {
			t.Error("a task other than the culprit was cancelled")
		}
		type row struct {
			Task    uint64
			Outcome policy.Outcome
		}
		var got []row
		for _, r := range ctl.Decisions() {
			got = append(got, row{r.Task, r.Outcome})
		}
		want := []row{
			{culprit.ID(), policy.Acted},
			{victim.ID(), policy.Skipped},  // not cancellable
			{culprit.ID(), policy.Skipped}, // already cancelled
			{other.ID(), policy.Skipped},   // minimum interval
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if err := ctl.Cancel(other.ID(), "operator"); err != nil {
			t.Errorf("manual cancel: %v", err)
		}
		if err := ctl.Cancel(victim.ID(), "operator"); err == nil {
			t.Error("manual cancel of a non-cancellable task succeeded")
		}
		for _, tk := range []*moirai.Task{culprit, victim, other} {
			tk.End(nil)
		}
		if ctl.Stats().Cancelled != 2 {
			t.Errorf("Stats().Cancelled = %d, want 2", ctl.Stats().Cancelled)
		}
	})
}

// TestFaultyUserCodeNeverStopsTheLoop: panicking policies, detectors, hooks
// and error handlers are recovered and reported; the loop keeps deciding.
func TestFaultyUserCodeNeverStopsTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reported errs
		var calls sync.WaitGroup
		calls.Add(1)
		var once sync.Once
		good := policyFunc{name: "good", fn: func(*snapshot.Snapshot) []policy.Decision {
			once.Do(calls.Done)
			return nil
		}}
		bad := policyFunc{name: "bad", fn: func(*snapshot.Snapshot) []policy.Decision { panic("policy bug") }}
		ctl := moirai.New(
			moirai.WithPolicy(bad, good),
			moirai.WithErrorHandler(func(err error) { reported.add(err); panic("handler bug") }),
		)
		defer ctl.Close()
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true})
		release := make(chan struct{})
		tk.OnCancel(func() { panic("hook bug") })
		tk.OnCancel(func() { <-release })
		time.Sleep(150 * time.Millisecond)
		calls.Wait()
		if err := ctl.Cancel(tk.ID(), "test"); err != nil {
			t.Fatal(err)
		}
		<-ctx.Done()
		time.Sleep(2 * time.Second) // the blocked hook passes its timeout
		synctest.Wait()
		close(release)
		synctest.Wait()
		tk.End(nil)

		var msgs []string
		for _, err := range reported.all() {
			msgs = append(msgs, err.Error())
		}
		all := strings.Join(msgs, "\n")
		for _, want := range []string{"policy bad panicked", "cancel hook", "panicked: hook bug", "still running after"} {
			if !strings.Contains(all, want) {
				t.Errorf("reported errors lack %q:\n%s", want, all)
			}
		}
		st := ctl.Stats()
		if st.HookPanics != 1 || st.HookBlocked != 1 {
			t.Errorf("hook panics %d, blocked %d; want 1, 1", st.HookPanics, st.HookBlocked)
		}
	})
}

// TestDetectorSwitchesToFineTickAndPreciseClock: while a detector fires, the
// loop runs the policies on every fine tick and the clock is precise.
func TestDetectorSwitchesToFineTickAndPreciseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fire := false
		steps := 0
		var precise []bool
		d := detectorFunc{name: "slo", fn: func(s *snapshot.Snapshot) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return fire, "p99 above target"
		}}
		p := policyFunc{name: "count", fn: func(s *snapshot.Snapshot) []policy.Decision {
			mu.Lock()
			defer mu.Unlock()
			steps++
			precise = append(precise, s.Precise)
			return nil
		}}
		ctl := moirai.New(moirai.WithDetector(d), moirai.WithPolicy(p), moirai.WithTick(100*time.Millisecond, 10*time.Millisecond))
		defer ctl.Close()

		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		if steps != 0 {
			t.Errorf("policies ran %d times with no detector firing", steps)
		}
		fire = true
		mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := ctl.Firing(); len(got) != 1 || !strings.Contains(got[0], "p99 above target") {
			t.Errorf("Firing() = %q", got)
		}
		mu.Lock()
		// about 90 fine ticks in the second after the first firing step
		if steps < 80 || steps > 100 {
			t.Errorf("policies ran %d times in a second of fine ticks, want about 90", steps)
		}
		if len(precise) > 1 && !precise[len(precise)-1] {
			t.Error("clock not precise while firing")
		}
		fire = false
		mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if ctl.Firing() != nil {
			t.Errorf("Firing() = %q after the detector stopped", ctl.Firing())
		}
	})
}

// TestUnendedTasksAreReported: a task whose request is over but which was
// never ended is reported once, after the grace period, and evicted: the
// registry stays bounded, and the application's late End is no mistake.
// Close reports the tasks still live.
func TestUnendedTasksAreReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reported errs
		ctl := moirai.New(moirai.WithErrorHandler(reported.add), moirai.WithUnendedGrace(time.Second))
		parent, cancel := context.WithCancel(context.Background())
		_, leaked := ctl.Begin(parent, moirai.Spec{Class: "forgot-to-end"})
		_, fine := ctl.Begin(parent, moirai.Spec{Class: "ended"})
		_, live := ctl.Begin(context.Background(), moirai.Spec{Class: "still-running"})
		cancel()
		fine.End(nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		st := ctl.Stats()
		if st.Unended != 1 || st.Live != 1 {
			t.Errorf("Stats() = %+v, want 1 unended, evicted, and 1 live", st)
		}
		leaked.End(nil) // late: accepted silently
		if st := ctl.Stats(); st.EndedTwice != 0 {
			t.Errorf("the evicted task's late End counted as ended twice: %+v", st)
		}
		if err := ctl.Close(); err == nil || !strings.Contains(err.Error(), "1 task(s) never ended") {
			t.Errorf("Close() = %v, want the one live task reported", err)
		}
		all := reported.all()
		if len(all) != 2 || !strings.Contains(all[0].Error(), "forgot-to-end") {
			t.Errorf("reported = %v", all)
		}
		live.End(nil)
	})
}

// TestForgottenEndsStayBounded: a service that never calls End keeps a
// bounded registry: every task whose request is over is evicted after the
// grace period, whatever their number.
func TestForgottenEndsStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithErrorHandler(func(error) {}), moirai.WithUnendedGrace(time.Second))
		defer ctl.Close()
		for round := range 5 {
			for range 2000 {
				ctx, cancel := context.WithCancel(context.Background())
				ctl.Begin(ctx, moirai.Spec{Class: "leaky"})
				cancel()
			}
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if st := ctl.Stats(); st.Live != 0 || st.Unended != int64(2000*(round+1)) {
				t.Fatalf("round %d: %+v, want none live and every forgotten task evicted", round, st)
			}
		}
	})
}

// TestWindowDeltas: a resource's window totals count only what happened
// since the loop's previous snapshot, ended tasks included.
func TestWindowDeltas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithTick(100*time.Millisecond, 10*time.Millisecond))
		defer ctl.Close()
		sem := ctl.Semaphore("slots", 1)
		ctx, a := ctl.Begin(context.Background(), moirai.Spec{})
		p, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(550 * time.Millisecond) // five loop steps while a holds
		synctest.Wait()
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		a.End(nil)
		s := ctl.Snapshot()
		r := s.Resources[s.ResourceByName("slots")]
		if r.Hold < 500*time.Millisecond {
			t.Errorf("cumulative hold %v, want ≥ 500ms", r.Hold)
		}
		if r.WindowHold > 100*time.Millisecond || r.WindowHold <= 0 {
			t.Errorf("window hold %v, want the part since the last step (≤ 100ms)", r.WindowHold)
		}
		if s.Window <= 0 || s.Window > 100*time.Millisecond {
			t.Errorf("window %v", s.Window)
		}
		if s.Completed.Ended != 1 || s.Completed.Latency.Count() != 1 {
			t.Errorf("completions in window = %+v", s.Completed)
		}
	})
}

// TestConstructorsRefuseBadNames: duplicate and empty names panic in the
// Must-style constructors and are errors from Register.
func TestConstructorsRefuseBadNames(t *testing.T) {
	ctl := moirai.New()
	defer ctl.Close()
	ctl.Mutex("m")
	for name, f := range map[string]func(){
		"duplicate": func() { ctl.Mutex("m") },
		"empty":     func() { ctl.RWMutex("") },
		"size 0":    func() { ctl.Semaphore("s", 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if _, err := ctl.Register("m", moirai.KindLock, 0); err == nil {
		t.Error("Register of a duplicate name succeeded")
	}
	if _, err := ctl.Resource("nope"); err == nil {
		t.Error("Resource of an unknown name succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Error("Begin with a nil context did not panic")
		}
	}()
	//lint:ignore SA1012 the nil context is the point
	ctl.Begin(nil, moirai.Spec{})
}

func TestControllerFence(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	if _, err := ctl.Fence("pool", 4, []fence.Reservation{{Name: "d1", Permits: 5}}); err == nil {
		t.Fatal("a reservation above the pool accepted")
	}
	f, err := ctl.Fence("pool", 4, []fence.Reservation{{Name: "d1", Permits: 2}})
	if err != nil {
		t.Fatalf("the refused fence took the name: %v", err)
	}
	if _, err := ctl.Fence("pool", 4, nil); err == nil {
		t.Error("a second fence of the same name accepted")
	}
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "c"})
	p, err := f.Acquire(ctx, f.Path("d1"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := ctl.Resource("pool")
	if !taskx.Holding(tk) || r.Kind() != resource.KindQueue {
		t.Errorf("the task does not hold the fence's queue resource")
	}
	p.Release()
	tk.End(nil)
}

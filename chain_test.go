package moirai_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
)

// A wait is charged to the root of its chain (DESIGN.md, rule 1 of
// blame): a root R holds lock "b" for seconds; a middle task M takes lock
// "a", then waits for "b"; light requests queue on "a". M holds what the
// requests wait for, but only on R's behalf: cancelling M frees "a" for a
// moment before the next request queues behind R again. The default
// controller must leave M alone and cancel R.
func TestChainCancelsTheRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
		defer ctl.Close()
		a, b := ctl.Mutex("a"), ctl.Mutex("b")
		var wg sync.WaitGroup
		var rootErr, midErr error
		rootIn := make(chan struct{})
		wg.Go(func() {
			ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "root", Cancellable: true})
			defer func() { task.End(rootErr) }()
			if rootErr = b.Lock(ctx); rootErr != nil {
				close(rootIn)
				return
			}
			close(rootIn)
			defer b.Unlock()
			for i := range int64(500) {
				select {
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
					rootErr = context.Cause(ctx)
					return
				}
				task.Progress(i+1, 500)
			}
		})
		<-rootIn
		time.Sleep(10 * time.Millisecond)
		wg.Go(func() {
			ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "middle", Cancellable: true})
			defer func() { task.End(midErr) }()
			if midErr = a.Lock(ctx); midErr != nil {
				return
			}
			defer a.Unlock()
			if midErr = b.Lock(ctx); midErr != nil {
				return
			}
			time.Sleep(time.Millisecond)
			b.Unlock()
		})
		time.Sleep(10 * time.Millisecond)
		for range 200 {
			time.Sleep(5 * time.Millisecond)
			wg.Go(func() {
				ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "insert", Cancellable: true})
				err := a.Lock(ctx)
				if err == nil {
					time.Sleep(time.Millisecond)
					a.Unlock()
				}
				task.End(err)
			})
		}
		wg.Wait()
		var classes []string
		for _, d := range ctl.Decisions() {
			if d.Action == policy.Cancel && d.Outcome == policy.Acted {
				classes = append(classes, d.TaskClass)
			}
		}
		if midErr != nil {
			t.Errorf("the middle task, waiting behind the root, ended with %v; cancellations %v", midErr, classes)
		}
		if !errors.Is(rootErr, moirai.ErrCancelled) {
			t.Errorf("the root ended with %v; want it cancelled; cancellations %v", rootErr, classes)
		}
	})
}

package cancel

import (
	"context"
	"net/http"
	"os"
	"time"
)

// Copy writes every chunk without looking at ctx: reported, with a safe
// point as a fix.
func Copy(ctx context.Context, f *os.File, chunks [][]byte) (int, error) {
	n := 0
	for _, c := range chunks { // want `loop in Copy does I/O \(\(\*os.File\).Write\) on every iteration but never checks ctx`
		m, err := f.Write(c)
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// Poll checks ctx: not reported.
func Poll(ctx context.Context, ready func() bool) error {
	for !ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Delegate passes ctx on: taken as checked.
func Delegate(ctx context.Context, n int) {
	for range n {
		step(ctx)
	}
}

func step(ctx context.Context) { time.Sleep(time.Millisecond) } // want `time.Sleep in step ignores ctx`

// Handle is an HTTP handler whose loop sleeps: the request's context is
// its context.
func Handle(w http.ResponseWriter, r *http.Request) {
	for i := 0; i < 10; i++ { // want `loop in Handle waits \(time.Sleep\) on every iteration but never checks r.Context\(\)`
		time.Sleep(time.Millisecond)
	}
}

// Backoff sleeps once, outside a loop: the sleep is reported, with a
// select as a fix.
func Backoff(ctx context.Context) (string, error) {
	time.Sleep(10 * time.Millisecond) // want `time.Sleep in Backoff ignores ctx: a cancellation \(moirai's or the client's\) waits for the sleep to end`
	return "", nil
}

// Sum's loop is pure computation: not reported.
func Sum(ctx context.Context, xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// Count returns a non-error result: reported, no fix offered.
func Count(ctx context.Context, f *os.File) int {
	n := 0
	for { // want `loop in Count does I/O`
		if _, err := f.Write(nil); err != nil {
			return n
		}
		n++
	}
}

// Drain ranges over a channel, which its closing ends: not reported.
func Drain(ctx context.Context, ch chan int) {
	for range ch {
		time.Sleep(time.Millisecond) // want `time.Sleep in Drain ignores ctx`
	}
}

// background has no context in scope: not reported.
func Background() {
	for {
		time.Sleep(time.Second)
	}
}

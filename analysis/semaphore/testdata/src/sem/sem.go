package sem

import (
	"context"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

type Server struct {
	tokens chan struct{}
	slots  *semaphore.Weighted
	jobs   chan func()
	done   chan int
	notify chan struct{}
}

func New(n int) *Server {
	return &Server{
		tokens: make(chan struct{}, n),
		slots:  semaphore.NewWeighted(int64(n)),
		jobs:   make(chan func(), 16),
		done:   make(chan int),
		notify: make(chan struct{}, 1),
	}
}

// Do holds a token while it works: a counting semaphore.
func (s *Server) Do(ctx context.Context, work func()) error {
	select {
	case s.tokens <- struct{}{}: // want `buffered channel Server.tokens \(a struct field\) is a counting semaphore \(a send acquires in \(\*Server\).Do, a receive releases\): make it a \*moirai.Semaphore \(ctl.Semaphore\("Server.tokens", n\)`
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.tokens }()
	work()
	return nil
}

// Weighted acquires x/sync semaphore units.
func (s *Server) Weighted(ctx context.Context) error {
	if err := s.slots.Acquire(ctx, 2); err != nil { // want `semaphore.Weighted Server.slots \(a struct field\) is acquired on a request path in \(\*Server\).Weighted`
		return err
	}
	defer s.slots.Release(2)
	return nil
}

// Start starts a pool of workers consuming jobs.
func (s *Server) Start(n int) {
	for range n {
		go s.worker() // want `goroutines started in a loop in \(\*Server\).Start consume channel Server.jobs: a worker pool`
	}
}

func (s *Server) worker() {
	for job := range s.jobs {
		job()
	}
}

// Finish hands a result to a waiting goroutine: an unbuffered hand-off,
// not a semaphore.
func (s *Server) Finish(v int) {
	s.done <- v
	<-s.done
}

// Wake coalesces notifications: the receive is elsewhere, not a
// semaphore.
func (s *Server) Wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Server) Loop() {
	for range s.notify {
	}
}

// Parallel bounds the goroutines of one call with a local semaphore:
// requests do not contend on it, not reported.
func Parallel(items []int) {
	sem := make(chan struct{}, 4)
	for range items {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
		}()
	}
}

// Group uses a limited errgroup: a worker pool.
func Group(items []int) error {
	var g errgroup.Group
	g.SetLimit(8) // want `errgroup with a limit in Group: a worker pool`
	for range items {
		g.Go(func() error { return nil })
	}
	return g.Wait()
}

// Tracker's slots are a pool of tokens: filled up front, a receive takes
// one, a send gives it back.
type Tracker struct{ next chan int }

func NewTracker(n int) *Tracker {
	t := Tracker{next: make(chan int, n)}
	t.fill(n)
	return &t
}

func (t Tracker) fill(n int) {
	for i := range n {
		t.next <- i
	}
}

func (t Tracker) Insert(ctx context.Context) (int, error) {
	select {
	case i := <-t.next: // want `buffered channel Tracker.next \(a struct field\) is a pool of tokens \(filled up front in`
		return i, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (t Tracker) Delete(i int) { t.next <- i }

// Pool fills itself to cap(ch) with a three-clause loop.
type Pool struct{ free chan struct{} }

func NewPool(n int) *Pool {
	p := &Pool{free: make(chan struct{}, n)}
	for i := 0; i < cap(p.free); i++ {
		p.free <- struct{}{}
	}
	return p
}

func (p *Pool) Get() { <-p.free } // want `buffered channel Pool.free \(a struct field\) is a pool of tokens`

func (p *Pool) Put() { p.free <- struct{}{} }

// Backlog is a queue preloaded with work, not a pool of tokens: its fill
// is bounded by the items, not by its capacity.
type Backlog struct{ items chan string }

func NewBacklog(items []string) *Backlog {
	b := &Backlog{items: make(chan string, 64)}
	for _, it := range items {
		b.items <- it
	}
	return b
}

func (b *Backlog) Next() string { return <-b.items }

func (b *Backlog) Push(s string) { b.items <- s }

// Prefill fills its channel but nobody gives a token back: a one-shot
// list of tickets, not a pool.
type Prefill struct{ tickets chan int }

func NewPrefill(n int) *Prefill {
	p := &Prefill{tickets: make(chan int, n)}
	for i := range n {
		p.tickets <- i
	}
	return p
}

func (p *Prefill) Take() int { return <-p.tickets }

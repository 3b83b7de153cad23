package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/sleep"
)

// Task classes: the statement shapes of the two kinds of request.
const (
	classInsert = "INSERT orders"
	classReport = "SELECT orders FOR UPDATE"
)

// Culprit states, as the service sees them.
const (
	culpritPending = iota
	culpritRunning
	culpritFinished
	culpritCancelled // by the controller
	culpritFailed    // any other error
)

// maxKey bounds the task key taken from a request header.
const maxKey = 64

// service is the embedded HTTP service. It uses only moirai's public API.
type service struct {
	ctl    *moirai.Controller
	orders *moirai.Mutex

	// culpritSeq is odd while the culprit holds the table lock: an insert
	// that sees it odd before its Lock, or changed after, waited while the
	// culprit held the lock.
	culpritSeq  atomic.Uint64
	behind      atomic.Int64 // inserts that waited behind the culprit
	state       atomic.Int32 // culpritPending, culpritRunning, …
	batch       atomic.Int64 // the culprit's current batch, from 1
	batchesDone atomic.Int64
}

func newService(ctl *moirai.Controller) *service {
	return &service{ctl: ctl, orders: ctl.Mutex(TableLock)}
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", s.track(classInsert, s.insert))
	mux.Handle("POST /report", s.track(classReport, s.report))
	return mux
}

// handlerFunc is a handler that runs as a moirai task and returns the
// outcome of its work.
type handlerFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request) error

// track runs h as a cancellable moirai task: Begin before, End with h's
// error after, whatever happens. The key comes from the X-Client header.
func (s *service) track(class string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Client")
		if len(key) > maxKey {
			key = key[:maxKey]
		}
		ctx, t := s.ctl.Begin(r.Context(), moirai.Spec{Class: class, Key: key, Cancellable: true})
		err := errPanicked
		defer func() { t.End(err) }()
		err = h(ctx, w, r)
		if err != nil {
			code := http.StatusInternalServerError
			if ctx.Err() != nil {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
		}
	})
}

// errPanicked is the outcome recorded for a handler that panicked.
var errPanicked = fmt.Errorf("demo: handler panicked")

// insert takes the table lock for about a millisecond.
func (s *service) insert(ctx context.Context, w http.ResponseWriter, _ *http.Request) error {
	before := s.culpritSeq.Load()
	if err := s.orders.Lock(ctx); err != nil {
		return err
	}
	if before%2 == 1 || s.culpritSeq.Load() != before {
		s.behind.Add(1)
	}
	time.Sleep(insertWork)
	s.orders.Unlock()
	w.WriteHeader(http.StatusCreated)
	return nil
}

// report is the culprit: a transaction that scans the table under its lock,
// in batches of hold each, reporting its progress (one row per
// millisecond), and stops at a safe point if its context is done.
func (s *service) report(ctx context.Context, w http.ResponseWriter, r *http.Request) (err error) {
	hold, batches, err := parseReport(r)
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil // the request was served: the client's mistake
	}
	s.state.Store(culpritRunning)
	defer func() {
		switch {
		case err == nil:
			s.state.Store(culpritFinished)
		case errors.Is(err, moirai.ErrCancelled):
			s.state.Store(culpritCancelled)
		default:
			s.state.Store(culpritFailed)
		}
	}()

	t := moirai.From(ctx)
	rows := hold.Milliseconds()
	total := rows * int64(batches)
	for b := range batches {
		if err := s.orders.Lock(ctx); err != nil {
			return err
		}
		s.culpritSeq.Add(1)
		s.batch.Store(int64(b + 1))
		err := scan(ctx, hold, func(done int64) { t.Progress(int64(b)*rows+done, total) })
		s.culpritSeq.Add(1)
		s.orders.Unlock()
		if err != nil {
			return err
		}
		s.batchesDone.Add(1)
		if b+1 < batches {
			// Commit, then begin the next transaction: by then the
			// waiters are queued ahead of the culprit's next Lock.
			if err := sleep.For(ctx, commitGap); err != nil {
				return err
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%d rows\n", total)
	return nil
}

// commitGap is the pause between two of the culprit's transactions.
const commitGap = 10 * time.Millisecond

// scan simulates reading rows for d, checking ctx at every row batch (a
// safe point) and reporting the rows done.
func scan(ctx context.Context, d time.Duration, progress func(done int64)) error {
	start := time.Now()
	for {
		el := time.Since(start)
		if el >= d {
			progress(d.Milliseconds())
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		progress(el.Milliseconds())
		time.Sleep(min(10*time.Millisecond, d-el))
	}
}

// parseReport reads the culprit's hold and batches from the query.
func parseReport(r *http.Request) (hold time.Duration, batches int, err error) {
	q := r.URL.Query()
	hold, err = time.ParseDuration(q.Get("hold"))
	if err != nil || hold < time.Millisecond || hold > time.Minute {
		return 0, 0, fmt.Errorf("demo: hold %q: want a duration in [1ms, 1m]", q.Get("hold"))
	}
	batches, err = strconv.Atoi(q.Get("batches"))
	if err != nil || batches < 1 || batches > 1000 {
		return 0, 0, fmt.Errorf("demo: batches %q: want an integer in [1, 1000]", q.Get("batches"))
	}
	return hold, batches, nil
}

// culpritState returns where the culprit is, as the service sees it.
func (s *service) culpritState() string {
	switch s.state.Load() {
	case culpritRunning:
		if s.culpritSeq.Load()%2 == 1 {
			return "holding " + TableLock
		}
		return "between batches"
	case culpritFinished:
		return "finished"
	case culpritCancelled:
		return "cancelled by moirai"
	case culpritFailed:
		return "failed"
	default:
		return "not started"
	}
}

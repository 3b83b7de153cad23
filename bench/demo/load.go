package demo

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxInFlight bounds the requests the load generator keeps open at once;
// arrivals beyond it are shed (counted, not sent). Each one holds a loopback
// connection, hence two file descriptors.
const maxInFlight = 1000

// customers is how many distinct task keys the inserts use.
const customers = 16

// load is the client side: an open-loop Poisson generator of inserts, and
// the culprit's one request.
type load struct {
	base   string
	client *http.Client
	tr     *http.Transport
	rate   float64
	rng    *rand.Rand
	limit  int64 // most arrivals in a run

	wg       sync.WaitGroup
	sent     atomic.Int64
	ok       atomic.Int64
	failed   atomic.Int64
	shed     atomic.Int64
	inflight atomic.Int64

	// t0 is the run's start, the time axis of samples; set before the
	// first request is sent.
	t0 time.Time

	mu             sync.Mutex
	lat            []time.Duration // of successful inserts
	samples        []Sample        // every insert, in completion order
	culpritOutcome error           // the culprit request's outcome
}

// Sample is one insert as the client saw it: when it was sent (since the
// run's start), how long it took, and whether it succeeded.
type Sample struct {
	At      time.Duration
	Latency time.Duration
	OK      bool
}

func newLoad(base string, cfg Config) *load {
	tr := &http.Transport{
		MaxIdleConns:        maxInFlight,
		MaxIdleConnsPerHost: maxInFlight,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	// The mean count is Rate × Duration; the bound is well above it.
	expected := cfg.Rate * cfg.Duration.Seconds()
	return &load{
		base:   base,
		client: &http.Client{Transport: tr},
		tr:     tr,
		rate:   cfg.Rate,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		limit:  int64(math.Ceil(2*expected)) + 100,
		lat:    make([]time.Duration, 0, int(math.Ceil(expected))+16),
	}
}

// generate sends inserts at Poisson arrival times until runCtx is done or
// the arrival bound is reached. Requests carry reqCtx, which outlives runCtx
// so that in-flight requests may finish.
func (l *load) generate(runCtx, reqCtx context.Context) {
	timer := time.NewTimer(time.Hour) // reset before every use
	defer timer.Stop()
	next := time.Now()
	for range l.limit {
		next = next.Add(time.Duration(l.rng.ExpFloat64() / l.rate * float64(time.Second)))
		timer.Reset(time.Until(next))
		select {
		case <-runCtx.Done():
			return
		case <-timer.C:
		}
		if l.inflight.Load() >= maxInFlight {
			l.shed.Add(1)
			continue
		}
		key := "customer-" + strconv.Itoa(l.rng.IntN(customers))
		l.inflight.Add(1)
		l.sent.Add(1)
		l.wg.Go(func() {
			defer l.inflight.Add(-1)
			l.insert(reqCtx, key)
		})
	}
}

func (l *load) insert(ctx context.Context, key string) {
	start := time.Now()
	err := l.post(ctx, l.base+"/orders", key)
	d := time.Since(start)
	at := start.Sub(l.t0)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, Sample{At: at, Latency: d, OK: err == nil})
	if err != nil {
		l.failed.Add(1)
		return
	}
	l.ok.Add(1)
	l.lat = append(l.lat, d)
}

// culprit sends the culprit's request at p.start, unless runCtx is done
// first.
func (l *load) culprit(runCtx, reqCtx context.Context, p plan) {
	q := url.Values{}
	q.Set("hold", p.hold.String())
	q.Set("batches", strconv.Itoa(p.batches))
	target := l.base + "/report?" + q.Encode()
	l.wg.Go(func() {
		t := time.NewTimer(p.start)
		defer t.Stop()
		select {
		case <-runCtx.Done():
			l.mu.Lock()
			l.culpritOutcome = errNotSent
			l.mu.Unlock()
			return
		case <-t.C:
		}
		err := l.post(reqCtx, target, "report-job")
		l.mu.Lock()
		l.culpritOutcome = err
		l.mu.Unlock()
	})
}

// errNotSent is the culprit's outcome when the run ended before its start.
var errNotSent = errors.New("not sent: the run ended first")

// post sends one request and reads its answer; a non-2xx status is an
// error.
func (l *load) post(ctx context.Context, target, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Client", key)
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// wait waits for every request to finish, at most d (d < 0: no limit), and
// reports whether they did.
func (l *load) wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	if d < 0 {
		<-done
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		// The goroutine above ends when the caller, having cancelled the
		// requests, waits again.
		return false
	}
}

// close releases the client's idle connections.
func (l *load) close() { l.tr.CloseIdleConnections() }

func (l *load) culpritErr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.culpritOutcome == nil {
		return ""
	}
	return l.culpritOutcome.Error()
}

// summary computes the client-side numbers once, at the end.
func (l *load) summary() Summary {
	l.mu.Lock()
	lat := slices.Clone(l.lat)
	samples := slices.Clone(l.samples)
	l.mu.Unlock()
	slices.Sort(lat)
	slices.SortFunc(samples, func(a, b Sample) int { return cmp.Compare(a.At, b.At) })
	s := Summary{
		Sent: l.sent.Load(), OK: l.ok.Load(), Failed: l.failed.Load(), Shed: l.shed.Load(),
		P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), Samples: samples,
	}
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

// quantile returns the q-quantile of sorted (nearest rank), 0 if empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

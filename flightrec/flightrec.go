// Package flightrec keeps the last seconds of the Go execution trace in
// memory (runtime/trace.FlightRecorder) and writes them to a file whenever
// the moirai controller cancels a task, so the moments before a
// cancellation can be read in `go tool trace`.
//
// Pass Recorder.Observe to moirai.WithDecisionObserver. Dumps are
// rate-limited (one per Interval); failures are logged, never fatal.
package flightrec

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"sync"
	"time"

	"github.com/moirai-go/moirai/policy"
)

// Config configures a Recorder.
type Config struct {
	Dir      string        // where trace files go; created if missing
	Window   time.Duration // how much recent trace to keep (default 5s)
	Interval time.Duration // minimum time between two dumps (default 10s)
	Logger   *slog.Logger  // default slog.Default()
	// Now returns the current time (default time.Now); tests script it.
	Now func() time.Time
}

// Recorder writes the recent trace on each cancellation decision.
type Recorder struct {
	cfg  Config
	fr   *trace.FlightRecorder
	mu   sync.Mutex
	last time.Time
	wg   sync.WaitGroup
	busy bool
	// files written; dumps refused by the rate limit or because one was in
	// progress; dumps that failed (see Counts).
	written, skipped, failed int64
}

// Start starts the flight recorder. At most one may run per process.
func Start(cfg Config) (*Recorder, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("flightrec: no directory")
	}
	if cfg.Window <= 0 {
		cfg.Window = 5 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("flightrec: %w", err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: cfg.Window})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("flightrec: %w", err)
	}
	return &Recorder{cfg: cfg, fr: fr}, nil
}

// Observe dumps the trace if r is an acted-on cancellation and the rate
// limit allows. The file is written in the background; Observe never blocks
// on I/O.
func (r *Recorder) Observe(rec policy.Record) {
	if rec.Action != policy.Cancel || rec.Outcome != policy.Acted {
		return
	}
	now := r.cfg.Now()
	r.mu.Lock()
	if r.fr == nil || r.busy || (!r.last.IsZero() && now.Sub(r.last) < r.cfg.Interval) {
		r.skipped++
		r.mu.Unlock()
		return
	}
	r.last, r.busy = now, true
	r.wg.Add(1)
	r.mu.Unlock()
	name := filepath.Join(r.cfg.Dir, fmt.Sprintf("moirai-%s-task%d.trace",
		now.UTC().Format("20060102T150405.000Z"), rec.Task))
	go func() {
		defer r.wg.Done()
		err := r.dump(name)
		r.mu.Lock()
		r.busy = false
		if err != nil {
			r.failed++
		} else {
			r.written++
		}
		r.mu.Unlock()
		if err != nil {
			r.cfg.Logger.Warn("moirai: flight recorder dump failed", "file", name, "err", err)
		} else {
			r.cfg.Logger.Info("moirai: flight recorder trace written", "file", name, "task", rec.Task, "policy", rec.Policy)
		}
	}()
}

func (r *Recorder) dump(name string) (err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
		}
	}()
	_, err = r.fr.WriteTo(f)
	return err
}

// Counts returns the files written, the dumps skipped and those failed.
func (r *Recorder) Counts() (written, skipped, failed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written, r.skipped, r.failed
}

// Wait waits for dumps in progress.
func (r *Recorder) Wait() { r.wg.Wait() }

// Close waits for dumps in progress and stops the flight recorder.
func (r *Recorder) Close() error {
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fr != nil {
		r.fr.Stop()
		r.fr = nil
	}
	return nil
}

package flightrec_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moirai-go/moirai/flightrec"
	"github.com/moirai-go/moirai/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cancelRec(id uint64) policy.Record {
	return policy.Record{Decision: policy.Decision{Policy: "atropos", Action: policy.Cancel, Task: id}, Outcome: policy.Acted}
}

func TestDumpsOnCancelRateLimited(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "traces")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r, err := flightrec.Start(flightrec.Config{Dir: dir, Interval: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Observe(policy.Record{Decision: policy.Decision{Action: policy.Penalize, Task: 1}, Outcome: policy.Acted}) // not a cancellation
	r.Observe(policy.Record{Decision: policy.Decision{Action: policy.Cancel, Task: 2}, Outcome: policy.Skipped}) // not acted
	r.Observe(cancelRec(42))
	r.Wait()
	r.Observe(cancelRec(43)) // within the interval
	now = now.Add(11 * time.Second)
	r.Observe(cancelRec(44))
	r.Wait()
	w, s, f := r.Counts()
	if w != 2 || s != 1 || f != 0 {
		t.Fatalf("written %d skipped %d failed %d, want 2 1 0", w, s, f)
	}
	for _, name := range []string{"moirai-20260102T030405.000Z-task42.trace", "moirai-20260102T030416.000Z-task44.trace"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 0 {
			t.Errorf("%s is empty", name)
		}
	}
}

func TestWriteFailureIsCounted(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(0, 0)
	r, err := flightrec.Start(flightrec.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A directory where the file should go makes the dump fail.
	if err := os.Mkdir(filepath.Join(dir, "moirai-19700101T000000.000Z-task7.trace"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Observe(cancelRec(7))
	r.Wait()
	if w, _, f := r.Counts(); w != 0 || f != 1 {
		t.Fatalf("written %d failed %d, want 0 1", w, f)
	}
}

func TestStartNeedsDir(t *testing.T) {
	if _, err := flightrec.Start(flightrec.Config{}); err == nil {
		t.Fatal("no error without a directory")
	}
}

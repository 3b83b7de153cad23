package flightrec_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/flightrec"
)

func ExampleStart() {
	dir, err := os.MkdirTemp("", "moirai-traces")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	rec, err := flightrec.Start(flightrec.Config{Dir: dir, Window: 5 * time.Second})
	if err != nil {
		log.Print(err) // observability only: run without it
		return
	}
	defer rec.Close()
	ctl := moirai.New(moirai.WithDecisionObserver(rec.Observe))
	defer ctl.Close()
	// Every cancellation now leaves dir/moirai-<time>-task<id>.trace.
}

// A Recorder dumps the recent execution trace when the controller acts;
// Counts says what it wrote, skipped (rate limit, a dump in progress) and
// failed to write.
func ExampleRecorder() {
	rec, err := flightrec.Start(flightrec.Config{Dir: os.TempDir()})
	if err != nil {
		log.Print(err)
		return
	}
	defer rec.Close()
	written, skipped, failed := rec.Counts()
	fmt.Println(written, skipped, failed)
	// Output: 0 0 0
}

// Config bounds how much trace is kept and how often it is written.
func ExampleConfig() {
	cfg := flightrec.Config{Dir: "/var/tmp/moirai", Window: 3 * time.Second, Interval: 30 * time.Second}
	fmt.Println(cfg.Window, cfg.Interval)
	// Output: 3s 30s
}

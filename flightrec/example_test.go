package flightrec_test

import (
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

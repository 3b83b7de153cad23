// Command moirai is the command-line tool of moirai, the overload-control
// library: `moirai demo`, a live view of what the runtime sees in an
// embedded service whose table lock is monopolized by one transaction,
// `moirai bench`, the evaluation harness, `moirai vet`, the analyzers that
// find what to instrument, `moirai cpus`, the CPU budget and neighbour
// share, `moirai guard`, targeted cancellation for a PostgreSQL or MariaDB
// server, and `moirai version`.
//
// Commands return errors; only main exits, with one of the Exit* codes.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(os.Stderr, "moirai: %v\n", err)
	}
	os.Exit(code)
}

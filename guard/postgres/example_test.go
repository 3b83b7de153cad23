package postgres_test

import (
	"context"
	"log"
	"os"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/postgres"
)

// The guard for a PostgreSQL server (guard.Open picks it for postgres://
// and postgresql:// DSNs): a pool of two connections named moirai-guard,
// checked for pg_monitor and pg_signal_backend at start. Not run here: it
// needs a server.
func ExampleSource() {
	ctx := context.Background()
	src, err := postgres.Open(ctx, "postgres://guard@127.0.0.1:5432/postgres")
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Check(ctx); err != nil {
		log.Fatal(err) // a *guard.PrivilegeError names the missing roles
	}
	g, err := guard.New(src, guard.Options{Audit: os.Stdout})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(g.Run(ctx))
}

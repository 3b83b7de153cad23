package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/internal/replicas"
)

// replicaServer is this server for the replicas harness: an incident is a
// transaction holding table gr_replica in ACCESS EXCLUSIVE mode while it
// runs pg_sleep, three readers queued behind it.
func replicaServer(t *testing.T) replicas.Server {
	server(t) // skips without a server
	table(t, "gr_replica")
	return replicas.Server{
		Interval: 100 * time.Millisecond,
		Open: func(ctx context.Context) (guard.Source, error) {
			return Open(ctx, dsn())
		},
		Incident: func(ctx context.Context, t *testing.T) (int64, func()) {
			h := client(t)
			hpid := pid(t, h)
			exec(t, h, "BEGIN; LOCK TABLE gr_replica IN ACCESS EXCLUSIVE MODE")
			hctx, stop := context.WithCancel(ctx)
			held := background(hctx, h, "SELECT pg_sleep(30)")
			var waiters []int64
			var done []<-chan error
			for range 3 {
				w := client(t)
				waiters = append(waiters, pid(t, w))

				done = append(done, background(hctx, w, "SELECT count(*) FROM gr_replica"))
			}
			waitLocked(t, waiters)
			return hpid, func() {
				stop()
				<-held
				for _, d := range done {
					<-d
				}
			}
		},
		Cut: func(ctx context.Context, src guard.Source) error {
			s := src.(*Source)
			if s.lease == nil {
				return fmt.Errorf("no lease connection")
			}
			c, err := pgx.Connect(ctx, dsn())
			if err != nil {
				return err
			}
			defer c.Close(ctx)
			_, err = c.Exec(ctx, "SELECT pg_terminate_backend($1)", s.lease.PgConn().PID())
			return err
		},
	}
}

// waitLocked waits until the sessions wait for a lock.
func waitLocked(t *testing.T, pids []int64) {
	t.Helper()
	c := client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1) AND wait_event_type = 'Lock'", pids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(pids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sessions waiting after 10s", n, len(pids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicas kills, or cuts the lease connection of, the active replica
// at each poll of an incident (before it decides, as it decides, after it
// acted): never a double action, and the standby takes over and acts.
func TestReplicas(t *testing.T) {
	srv := replicaServer(t)
	for _, mode := range []replicas.Mode{replicas.Kill, replicas.Cut} {
		for _, at := range []int{0, 2, 4, 6, 8} {
			t.Run(fmt.Sprintf("%s-at-poll-%d", mode, at), func(t *testing.T) {
				r := replicas.Run(t, srv, mode, at)
				t.Logf("%s at poll %d: acted by %s, lease held again by %s after %d poll(s), standby acted %d poll(s) after it could, double actions %d",
					mode, at, r.ActedBy, r.Holder, r.TakeoverPolls, r.ActPolls, r.DoubleActions)
				if r.DoubleActions != 0 {
					t.Errorf("%d incidents acted on twice", r.DoubleActions)
				}
				if !r.Acted {
					t.Error("the incident's holder was never acted on")
				}
				if r.TakeoverPolls < 0 || r.TakeoverPolls > 3 {
					t.Errorf("takeover in %d polls, want 1 to 3", r.TakeoverPolls)
				}
				if r.ActedBy == "B" && r.ActPolls > 3 {
					t.Errorf("the standby acted %d polls after it could, want at most 3", r.ActPolls)
				}
			})
		}
	}
}

// TestRecordReplay records the polls of a live dry-run guard on an
// incident and replays them: the replay decides what the live guard did.
func TestRecordReplay(t *testing.T) {
	n := replicas.RecordReplay(t, replicaServer(t))
	t.Logf("%d polls recorded and replayed: the same decisions", n)
}

package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/internal/replicas"
)

// TestReplicas kills, or cuts the lease connection of, the active replica
// at each poll of an incident (a transaction holding a row FOR UPDATE
// while it runs SLEEP, three UPDATEs of the row queued behind it): never
// a double action, and the standby takes over and acts.
func TestReplicas(t *testing.T) {
	srv := replicaServer(t)
	for _, mode := range []replicas.Mode{replicas.Kill, replicas.Cut} {
		for _, at := range []int{0, 2, 4, 6} {
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

// replicaServer is this server for the replicas harness: an incident is a
// transaction holding a row FOR UPDATE while it runs SLEEP, three UPDATEs
// of the row queued behind it.
func replicaServer(t *testing.T) replicas.Server {
	_, db, ctx := server(t)
	table(t, ctx, db, "gr_replica")
	return replicas.Server{
		Interval: 250 * time.Millisecond,
		Open: func(ctx context.Context) (guard.Source, error) {
			return Open(ctx, dsn())
		},
		Incident: func(ictx context.Context, t *testing.T) (int64, func()) {
			h := newSession(t, ctx, db)
			h.exec(t, ctx, "BEGIN")
			h.exec(t, ctx, "SELECT * FROM gr_replica WHERE id = 1 FOR UPDATE")
			h.background(ctx, "SELECT SLEEP(30)")
			var ws []*session
			var errs []<-chan error
			for range 3 {
				w := newSession(t, ctx, db)
				errs = append(errs, w.background(ctx, "UPDATE gr_replica SET v = v + 1 WHERE id = 1"))
				ws = append(ws, w)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				var n int
				if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM information_schema.INNODB_TRX
					WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id IN (%d, %d, %d)`, ws[0].id, ws[1].id, ws[2].id)).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 3 {
					break
				}
				if time.Now().After(deadline) {
					for _, e := range errs {
						select {
						case err := <-e:
							t.Logf("an UPDATE returned: %v", err)
						default:
						}
					}
					t.Fatalf("%d of 3 UPDATEs waiting after 10s", n)
				}
				time.Sleep(150 * time.Millisecond) // the InnoDB views refresh only 100 ms after the last read
			}
			return h.id, func() {
				for _, s := range append(ws, h) {
					db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", s.id))
				}
			}
		},
		Cut: func(ctx context.Context, src guard.Source) error {
			s := src.(*Source)
			if s.lease == nil {
				return fmt.Errorf("no lease connection")
			}
			var id int64
			if err := s.lease.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
			return err
		},
	}
}

// TestRecordReplay records the polls of a live dry-run guard on an
// incident and replays them: the replay decides what the live guard did.
func TestRecordReplay(t *testing.T) {
	n := replicas.RecordReplay(t, replicaServer(t))
	t.Logf("%d polls recorded and replayed: the same decisions", n)
}

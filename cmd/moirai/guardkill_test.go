package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// replica is one `moirai guard` process of TestGuardReplicasKilled.
type replica struct {
	name, addr, audit string
	cmd               *exec.Cmd
}

// role asks the replica's /healthz for its role ("" when it does not
// answer).
func (r *replica) role() string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + r.addr + "/healthz")
	if err != nil {
		return ""
	}
	resp.Body.Close()
	return resp.Header.Get("X-Moirai-Guard-Role")
}

// acted returns the sessions the replica's audit says it acted on.
func (r *replica) acted(t *testing.T) map[int64]int {
	out := map[int64]int{}
	f, err := os.Open(r.audit)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d struct {
			Msg, Outcome string
			Session      int64
		}
		if json.Unmarshal(sc.Bytes(), &d) == nil && d.Msg == "decision" && d.Outcome == "acted" {
			out[d.Session]++
		}
	}
	return out
}

// TestGuardReplicasKilled runs two `moirai guard --act` processes on the
// local MariaDB, scoped to a database of the test's own, and kills the
// active one with SIGKILL in the middle of an incident (its waiters
// queued, before it acts): the standby takes the lease over and acts on
// the incident, and no session is acted on twice. It measures the
// takeover (from the kill to the standby's /healthz saying "active") and
// the standby's action, in polls.
func TestGuardReplicasKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	admin, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err == nil {
		err = admin.Ping()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MariaDB unreachable under CI: %v", err)
		}
		t.Skipf("no MariaDB: %v", err)
	}
	t.Cleanup(func() { admin.Close() }) // after the cleanups registered below
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db := fmt.Sprintf("moirai_guardkill_%06d", rand.IntN(1_000_000))
	for _, q := range []string{"CREATE DATABASE " + db, "CREATE TABLE " + db + ".t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO " + db + ".t VALUES (1, 0), (2, 0)"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + db) })
	const interval = 250 * time.Millisecond
	dir := t.TempDir()
	start := func(name string) *replica {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: name, addr: lis.Addr().String(), audit: filepath.Join(dir, name+".jsonl")}
		lis.Close()
		r.cmd = exec.Command(os.Args[0], "guard", "--dsn", "mysql://root@tcp(127.0.0.1:3306)/"+db, "--act", "--allow-superuser",
			"--interval", interval.String(), "--slo", "1s", "--audit", r.audit, "--metrics-addr", r.addr)
		r.cmd.Env = append(os.Environ(), "MOIRAI_TEST_RUN_MAIN=1")
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			r.cmd.Process.Signal(syscall.SIGTERM)
			r.cmd.Wait()
		})
		return r
	}
	until := func(what string, limit time.Duration, ok func() bool) time.Duration {
		t0 := time.Now()
		for !ok() {
			if time.Since(t0) > limit {
				t.Fatalf("%s: not within %v", what, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(t0)
	}
	a := start("a")
	until("replica a active", 20*time.Second, func() bool { return a.role() == "active" })
	b := start("b")
	until("replica b standing by", 20*time.Second, func() bool { return b.role() == "standby" })

	// An incident: a transaction holds row 1 while it runs SLEEP, three
	// UPDATEs of the row wait. It is the test's own, in its own database.
	incident := func() (holder int64, end func()) {
		conns := make([]*sql.Conn, 4)
		ids := make([]int64, 4)
		for i := range conns {
			c, err := admin.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
			if _, err := c.ExecContext(ctx, "USE "+db); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&ids[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"BEGIN", "SELECT * FROM t WHERE id = 1 FOR UPDATE"} {
			if _, err := conns[0].ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan struct{}, len(conns))
		for i, c := range conns {
			q := "UPDATE t SET v = v + 1 WHERE id = 1"
			if i == 0 {
				q = "SELECT SLEEP(60)"
			}
			go func() { c.ExecContext(ctx, q); done <- struct{}{} }()
		}
		until("the UPDATEs waiting", 20*time.Second, func() bool {
			var n int
			admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p
				ON p.ID = t.trx_mysql_thread_id WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`, db).Scan(&n)
			time.Sleep(100 * time.Millisecond) // the InnoDB views refresh 100 ms after the last read
			return n == 3
		})
		return ids[0], func() { // the test's own sessions only
			for _, id := range ids {
				admin.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id))
			}
			for range conns {
				<-done
			}
			for _, c := range conns {
				c.Close()
			}
		}
	}
	began := time.Now()
	h, end := incident()
	queued := time.Since(began)
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	takeover := until("b takes the lease over", 30*time.Second, func() bool { return b.role() == "active" })
	actedAfter := until("b acts on the incident", 30*time.Second, func() bool { return b.acted(t)[h] > 0 })
	end()
	doubles := 0
	all := map[int64]int{}
	for _, r := range []*replica{a, b} {
		for s, n := range r.acted(t) {
			all[s] += n
		}
	}
	for _, n := range all {
		if n > 1 {
			doubles++
		}
	}
	t.Logf("SIGKILL of the active replica %v into the incident (its waiters queued): the standby held the lease %v later (%.2f polls of %v), acted on the incident %v after that (%.1f polls at the 100-ms alert interval); %d sessions acted on twice",
		queued.Round(time.Millisecond), takeover.Round(time.Millisecond), float64(takeover)/float64(interval), interval, actedAfter.Round(time.Millisecond),
		float64(actedAfter)/float64(100*time.Millisecond), doubles)
	if doubles != 0 {
		t.Errorf("%d sessions acted on twice", doubles)
	}
	if float64(takeover)/float64(interval) > 3 {
		t.Errorf("takeover in %v, more than 3 polls of %v", takeover, interval)
	}
	if all[h] != 1 {
		t.Errorf("the holder acted on %d times, want once", all[h])
	}
}

package dbsuite

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
)

// A run with a checkpoint (the warm-up's end): the final report counts
// from the checkpoint on; the histogram is the final one.
func TestParseSysbench(t *testing.T) {
	b, err := os.ReadFile("testdata/sysbench-checkpoint.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSysbench(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := &Sysbench{Transactions: 4845, PerSec: 2436.69, AvgMs: 1.65, P99Ms: 11.45, Histogram: []Bucket{
		{0.280, 1}, {0.296, 1}, {0.301, 2}, {0.312, 1}, {19.295, 1}, {27.659, 1}, {29.194, 1}, {30.265, 1}, {30.815, 1}, {33.718, 1},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	m := got.measure(10 * time.Second)
	if m.completed != 4845 || len(m.lat) != 11 || m.lat[2] != 0.301 || m.lat[3] != 0.301 {
		t.Errorf("measure: completed %d, %d latencies %v", m.completed, len(m.lat), m.lat)
	}
	if m.throughput() != 484.5 {
		t.Errorf("throughput %v, want 484.5", m.throughput())
	}
}

func TestParseSysbenchIgnoredErrors(t *testing.T) {
	out := `SQL statistics:
    transactions:                        120    (12.00 per sec.)
    ignored errors:                      7      (0.70 per sec.)
Latency (ms):
         avg:                                    80.10
         99th percentile:                      2009.23
`
	got, err := ParseSysbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Transactions != 120 || got.Ignored != 7 || got.P99Ms != 2009.23 || got.AvgMs != 80.1 || len(got.Histogram) != 0 {
		t.Errorf("%+v", got)
	}
	if m := got.measure(10 * time.Second); m.failed != 7 || m.completed != 120 {
		t.Errorf("measure %+v", m)
	}
}

func TestParseSysbenchNoReport(t *testing.T) {
	for _, out := range []string{"", "FATAL: unable to connect to MySQL server on host '127.0.0.1'\n", "transactions: many\n"} {
		if _, err := ParseSysbench(out); err == nil {
			t.Errorf("%q: no error", out)
		}
	}
}

func FuzzParseSysbench(f *testing.F) {
	if b, err := os.ReadFile("testdata/sysbench-checkpoint.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("    transactions:  1 (1.00 per sec.)\n  1.5 |*** 3\n")
	f.Add("Latency histogram\n 0.1 | 99999999999999999999\n")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := ParseSysbench(out)
		if err != nil {
			return
		}
		if s.Transactions < 0 || s.Ignored < 0 || math.IsNaN(s.PerSec) || math.IsInf(s.PerSec, 0) {
			t.Fatalf("%+v", s)
		}
		for _, b := range s.Histogram {
			if b.Count < 0 || math.IsNaN(b.Ms) || math.IsInf(b.Ms, 0) {
				t.Fatalf("bucket %+v", b)
			}
		}
		if m := s.measure(time.Second); len(m.lat) > maxExpanded {
			t.Fatalf("%d latencies", len(m.lat))
		}
	})
}

func TestParsePtKill(t *testing.T) {
	out := `# 2026-11-22T23:40:45 KILL QUERY 151 (Query 6 sec) UPDATE dbsuite_accounts SET balance = balance + 1 WHERE id = 390
# 2026-11-22T23:40:46 KILL 150 (Query 7 sec) SELECT SLEEP(600)
# 2026-11-22T23:40:47 KILL QUERY x (Query 8 sec) garbage
some warning
# 2026-11-22T23:40:48 KILL QUERY 0 (Query 9 sec) zero`
	if d := cmp.Diff([]int64{151, 150}, ParsePtKill(out)); d != "" {
		t.Error(d)
	}
	if ParsePtKill("") != nil {
		t.Error("ids from nothing")
	}
}

func TestIsMySQLCancel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1317}, true},
		{fmt.Errorf("exec: %w", &mysql.MySQLError{Number: 1969}), true},
		{&mysql.MySQLError{Number: 1205}, true},
		{&mysql.MySQLError{Number: 1927}, true},
		{mysql.ErrInvalidConn, true},
		{&mysql.MySQLError{Number: 1146}, false},
		{errors.New("boom"), false},
	} {
		if got := IsMySQLCancel(tc.err); got != tc.want {
			t.Errorf("%v: %v", tc.err, got)
		}
	}
}

func TestVictimLua(t *testing.T) {
	plain := victimLua("", false)
	if strings.Contains(plain, "SET SESSION") || !strings.Contains(plain, "UPDATE "+pgTable) || !strings.Contains(plain, "uniform(1, 1000)") {
		t.Errorf("script:\n%s", plain)
	}
	o := Options{}
	o.defaults()
	with := victimLua(o.mysqlTimeouts(), false)
	if !strings.Contains(with, `con:query("SET SESSION max_statement_time = 5, innodb_lock_wait_timeout = 2, lock_wait_timeout = 2")`) {
		t.Errorf("script with timeouts:\n%s", with)
	}
}

// TestHotRowVictims: the hot-row cases' victims send half their updates
// to the first hotRowCount rows; the other cases' never do.
func TestHotRowVictims(t *testing.T) {
	hot := "if sysbench.rand.uniform(0, 1) == 0 then id = sysbench.rand.uniform(1, 4) end"
	if !strings.Contains(victimLua("", true), hot) || strings.Contains(victimLua("", false), hot) {
		t.Errorf("hot script:\n%s\nplain:\n%s", victimLua("", true), victimLua("", false))
	}
	if !strings.Contains(hotVictimScript, `\set id random(1, 4)`) || strings.Contains(victimScript, `\if`) {
		t.Errorf("pgbench scripts:\n%s\n%s", hotVictimScript, victimScript)
	}
	for name := range hotRowCases {
		found := false
		for _, c := range PostgresCases() {
			found = found || c.Name == name
		}
		for _, c := range MySQLCases() {
			found = found || c.Name == name
		}
		if !found {
			t.Errorf("hot-row case %s is no case", name)
		}
	}
}

func TestMySQLArgs(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.Addr, cfg.User, cfg.Passwd = "127.0.0.1:3307", "bench", "pw"
	if d := cmp.Diff([]string{"--mysql-host=127.0.0.1", "--mysql-port=3307", "--mysql-user=bench", "--mysql-password=pw"}, mysqlArgs(cfg, "--mysql-")); d != "" {
		t.Error(d)
	}
	cfg.Addr, cfg.Passwd = "db.local", ""
	if d := cmp.Diff([]string{"--host=db.local", "--port=3306", "--user=bench"}, mysqlArgs(cfg, "--")); d != "" {
		t.Error(d)
	}
}

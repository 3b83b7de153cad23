package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/moirai-go/moirai/guard"
)

func TestGuardConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "guard.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("dsn: postgres://x@127.0.0.1:1/db\nslo: 2s\ninterval: 500ms\nprotect-user: [a, b]\nact: true\nmax-per-minute: 3\n")
	cmd := newGuardCommand(&globalFlags{})
	if err := cmd.ParseFlags([]string{"--slo", "3s", "--protect-user", "c"}); err != nil {
		t.Fatal(err)
	}
	f, err := loadGuardFlags(cmd.Flags(), path)
	if err != nil {
		t.Fatal(err)
	}
	if f.dsn != "postgres://x@127.0.0.1:1/db" || f.slo != 3*time.Second || f.interval != 500*time.Millisecond ||
		!f.act || f.maxPerMinute != 3 || strings.Join(f.protectUsers, ",") != "c" {
		t.Errorf("flags %+v: want the file's, the command line's --slo and --protect-user over them", f)
	}
	for _, bad := range []string{"slo: fast\n", "no-such-flag: 1\n", "protect-user: {a: 1}\n", "slo: [1s, 2s]\n", "config: x\n", "dsn: [\n"} {
		write(bad)
		if _, err := loadGuardFlags(newGuardCommand(&globalFlags{}).Flags(), path); err == nil {
			t.Errorf("config %q accepted", bad)
		}
	}
}

// TestGuardReplayCommand records a scripted incident's polls and replays
// them through the command.
func TestGuardReplayCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "polls.jsonl")
	if err := os.WriteFile(path, []byte(recordedIncident(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, "guard", "replay", path, "--all-databases")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "cancel session 10") || !strings.Contains(out, "dry-run") {
		t.Errorf("replay printed %q, want the dry-run cancel of session 10", out)
	}
	out, _, err = run(t, "guard", "replay", path, "--all-databases", "--protect-user", "app")
	if err != nil || strings.Contains(out, "cancel session 10") {
		t.Errorf("replay with the culprit's user protected printed %q (%v): want no cancel", out, err)
	}
}

// recordedIncident is the record of a guard's polls of a table locked by
// session 10 while 20 waits.
func recordedIncident(t *testing.T) string {
	var b strings.Builder
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for n := range 6 {
		now := at.Add(time.Duration(n) * 250 * time.Millisecond)
		obs := guard.Observation{At: now,
			Sessions: []guard.Session{
				{ID: 10, User: "app", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = v + 1", XactStart: at.Add(-10 * time.Second), QueryStart: at.Add(-9 * time.Second)},
				{ID: 20, User: "web", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = 1 WHERE id = 7", XactStart: at.Add(-2 * time.Second), QueryStart: at.Add(-2 * time.Second)}},
			Resources: []guard.Resource{{Name: "relation:app.public.t"}},
			Uses: []guard.Use{{Session: 10, Resource: "relation:app.public.t", Held: true},
				{Session: 20, Resource: "relation:app.public.t", Waiting: true, BlockedBy: []int64{10}, Since: at.Add(-2 * time.Second)}}}
		line, err := json.Marshal(map[string]any{"msg": "poll", "source": "postgres", "observation": obs})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteString("\n{\"msg\":\"decision\"}\n")
	}
	return b.String()
}

// TestGuardReloads runs `moirai guard` as a service on the local
// PostgreSQL, polling every 10 ms with every poll written to the audit
// file, and reloads it 100 times (SIGHUP) with the config alternating,
// then once with a bad file: every reload applied, the bad one refused
// with the config in force kept, no audit line lost (the file's polls and
// decisions against the metrics' counts), and a graceful stop.
func TestGuardReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := os.Getenv("MOIRAI_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:5432", time.Second); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable under CI: %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	} else {
		c.Close()
	}
	dir := t.TempDir()
	cfg, audit := filepath.Join(dir, "guard.yaml"), filepath.Join(dir, "audit.jsonl")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	conf := func(slo string) string {
		return fmt.Sprintf("dsn: %q\ninterval: 10ms\nslo: %s\naudit: %q\naudit-polls: true\nmetrics-addr: %q\nskip-privilege-check: true\n", dsn, slo, audit, addr)
	}
	write := func(s string) {
		if err := os.WriteFile(cfg+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfg+".tmp", cfg); err != nil {
			t.Fatal(err)
		}
	}
	write(conf("1s"))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCommand(&strings.Builder{}, &lockedWriter{})
		root.SetArgs([]string{"guard", "--config", cfg})
		done <- root.ExecuteContext(ctx)
	}()
	status := func() guard.Status {
		var st guard.Status
		for range 500 {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if err == nil && st.Polls > 0 {
					return st
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the guard never became ready")
		return st
	}
	st := status()
	const reloads = 100
	for i := range reloads {
		slo := []string{"2s", "1s"}[i%2]
		write(conf(slo))
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for st = status(); st.Reloads < uint64(i+1) || st.SLO.String() != slo; st = status() {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d: status %+v, want %d reloads and slo %s", i+1, st, i+1, slo)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write("dsn: [\n")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for st = status(); st.ReloadError == ""; st = status() {
		if time.Now().After(deadline) {
			t.Fatal("the bad config was not refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Reloads != reloads || st.SLO != time.Second {
		t.Fatalf("after the bad file: %+v, want %d reloads and the slo in force (1s) kept", st, reloads)
	}
	polls, decisions := metricSums(t, addr)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("guard: %v", err)
	}
	// The metrics were read before the stop: the file holds at least
	// those, and every line is whole JSON.
	f, err := os.Open(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var linePolls, lineDecisions float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct{ Msg string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		switch l.Msg {
		case "poll":
			linePolls++
		case "decision":
			lineDecisions++
		}
	}
	if linePolls < polls || lineDecisions < decisions {
		t.Fatalf("audit: %v polls and %v decisions, the metrics counted %v and %v: lines lost", linePolls, lineDecisions, polls, decisions)
	}
	t.Logf("%d reloads under %v polls (10 ms apart, each an audit line): 0 audit lines lost; the bad file refused: %s", reloads, linePolls, st.ReloadError)
}

// metricSums reads the guard's polls and decisions from its metrics.
func metricSums(t *testing.T, addr string) (polls, decisions float64) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mfs["moirai_guard_polls_total"].GetMetric() {
		polls += m.GetCounter().GetValue()
	}
	for _, m := range mfs["moirai_guard_decisions_total"].GetMetric() {
		decisions += m.GetCounter().GetValue()
	}
	return polls, decisions
}

// lockedWriter is a stderr the guard's goroutines share.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestShippedConfig: the example config of deploy/guard parses and gives
// valid options, so the packaging cannot drift from the flags.
func TestShippedConfig(t *testing.T) {
	f, err := loadGuardFlags(newGuardCommand(&globalFlags{}).Flags(), "../../deploy/guard/guard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.options(io.Discard); err != nil {
		t.Fatal(err)
	}
	if f.audit == "" || f.metricsAddr == "" || f.act {
		t.Errorf("shipped config %+v: want an audit file, metrics and no --act", f)
	}
}

// FuzzGuardConfig reads fuzzed config files as `moirai guard --config`
// does: every file is refused with an error or gives flags whose options
// are valid or refused with an error; nothing panics.
func FuzzGuardConfig(f *testing.F) {
	f.Add("slo: 1s\nprotect-user: [a, b]\nact: true\n")
	f.Add("dsn: [\n")
	f.Add("interval: {a: 1}\nmax-per-minute: 1e99\n")
	f.Add("protect-query: \"(\"\nprotect-app: [[x]]\n")
	f.Add("? [a]\n: b\n")
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(t.TempDir(), "guard.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		fl, err := loadGuardFlags(newGuardCommand(&globalFlags{}).Flags(), path)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if _, err := fl.options(io.Discard); err != nil && err.Error() == "" {
			t.Fatal("an empty error")
		}
	})
}

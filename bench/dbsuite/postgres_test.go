package dbsuite

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParsePgbenchLine(t *testing.T) {
	type parsed struct {
		Lat    float64
		Failed bool
		At     time.Time
		OK     bool
	}
	at := time.Unix(1700000000, 123456000)
	for _, tc := range []struct {
		line string
		want parsed
	}{
		{"0 12 2760 0 1700000000 123456", parsed{2.76, false, at, true}},
		{"3 7 1500 0 1700000000 123456 250", parsed{1.5, false, at, true}},
		{"1 2 failed 0 1700000000 123456", parsed{0, true, at, true}},
		{"1 2 skipped 0 1700000000 123456 10", parsed{0, true, at, true}},
		{"", parsed{}},
		{"0 1 2760 0 1700000000", parsed{}},
		{"0 1 abc 0 1700000000 1", parsed{}},
		{"0 1 -5 0 1700000000 1", parsed{}},
		{"0 1 5 0 1700000000 1000000", parsed{}},
		{"0 1 5 0 -1 1", parsed{}},
	} {
		lat, failed, a, ok := ParsePgbenchLine(tc.line)
		if diff := cmp.Diff(tc.want, parsed{lat, failed, a, ok}); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.line, diff)
		}
	}
}

func FuzzParsePgbenchLine(f *testing.F) {
	f.Add("0 12 2760 0 1700000000 123456")
	f.Add("1 2 failed 0 1700000000 123456")
	f.Add("x y z")
	f.Fuzz(func(t *testing.T, line string) {
		lat, failed, at, ok := ParsePgbenchLine(line)
		if !ok {
			if lat != 0 || failed || !at.IsZero() {
				t.Fatalf("%q: not ok but returned %v %v %v", line, lat, failed, at)
			}
			return
		}
		if lat < 0 || math.IsNaN(lat) || (failed && lat != 0) || at.Before(time.Unix(0, 0)) {
			t.Fatalf("%q: %v %v %v", line, lat, failed, at)
		}
	})
}

func ms(vs ...float64) []float64 { return vs }

func TestRowNormalization(t *testing.T) {
	normal := &measure{window: 10 * time.Second, completed: 10, lat: ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 2)}
	unc := &measure{window: 10 * time.Second, completed: 5, lat: ms(10, 10, 10, 10, 20), failed: 5}
	ctl := &measure{window: 10 * time.Second, completed: 9, lat: ms(1, 1, 1, 1, 1, 1, 1, 1, 4), failed: 1, culpritCancels: 1, cancels: 1}
	r := ctl.row(SuitePostgres, "pg-lock-table", "guard", normal, unc)
	if r.ThroughputNorm != 0.9 {
		t.Errorf("throughput_norm %v, want 0.9", r.ThroughputNorm)
	}
	if r.P99Norm != 2 {
		t.Errorf("p99_norm %v, want 2 (4 ms over 2 ms)", r.P99Norm)
	}
	if r.DropRate != 0.1 || r.CulpritsCancelled != 1 || r.Cancelled != 1 || r.VictimsCancelled != 0 {
		t.Errorf("row %+v", r)
	}
	if r.InterferenceReduction == nil || math.Abs(*r.InterferenceReduction-(12-12.0/9)/(12-1.1)) > 1e-9 {
		t.Errorf("interference reduction %v", r.InterferenceReduction)
	}
	if got := ctl.sloAttainment(2 * time.Millisecond); got != 0.8 {
		t.Errorf("slo attainment %v, want 8 of 10", got)
	}
	if got := unc.row(SuitePostgres, "c", "none", normal, unc); got.P99Norm != 10 || got.Degraded == nil || !*got.Degraded {
		t.Errorf("uncontrolled p99_norm %v, degraded %v; want 10, degraded", got.P99Norm, got.Degraded)
	}
	if r.Degraded != nil {
		t.Errorf("a controlled row carries the sanity check")
	}
	if got := normal.row(SuitePostgres, "c", "none", normal, unc); got.Degraded == nil || *got.Degraded {
		t.Errorf("uncontrolled run like the normal one: degraded %v, want not degraded", got.Degraded)
	}
}

func TestSelect(t *testing.T) {
	cs, err := selectByName(PostgresCases(), []string{"pg-ddl-queue", "pg-lock-table"}, func(c Case) string { return c.Name })
	if err != nil || len(cs) != 2 || cs[0].Name != "pg-ddl-queue" {
		t.Fatalf("%v %v", cs, err)
	}
	if all, _ := selectByName(PostgresControllers(), []string{"all"}, func(c Controller) string { return c.Name }); len(all) != 4 {
		t.Fatalf("all controllers: %d", len(all))
	}
	if _, err := selectByName(PostgresControllers(), []string{"nope"}, func(c Controller) string { return c.Name }); err == nil {
		t.Fatal("unknown controller accepted")
	}
}

func TestReadPgbenchLogs(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "log")
	// Window [1000 s, 1010 s): a transaction before it, three in it (one
	// failed), one that began in it and ended after it (blocked), a
	// malformed line, and one entirely after.
	log := "0 1 1000 0 999 500000\n" +
		"0 2 2000 0 1001 0\n" +
		"1 1 3000 0 1002 0\n" +
		"1 2 failed 0 1003 0\n" +
		"2 1 8000000 0 1012 0\n" +
		"garbage\n" +
		"2 2 1000 0 1011 0\n"
	if err := os.WriteFile(prefix+".123", []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readPgbenchLogs(prefix, time.Unix(1000, 0), time.Unix(1010, 0))
	if err != nil {
		t.Fatal(err)
	}
	if m.completed != 2 || m.failed != 1 {
		t.Errorf("completed %d failed %d, want 2 and 1", m.completed, m.failed)
	}
	if diff := cmp.Diff([]float64{2, 3, 8000}, m.lat); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
	if _, err := readPgbenchLogs(filepath.Join(dir, "none"), time.Unix(0, 0), time.Unix(1, 0)); err == nil {
		t.Error("no log: no error")
	}
}

func TestMatrix(t *testing.T) {
	opt := Options{}
	opt.defaults()
	var calls []string
	afters := 0
	res := &bench.Results{Suite: SuiteMySQL}
	run := func(i int, ctl *Controller) (*measure, error) {
		name := "normal"
		completed := 10
		if ctl != nil {
			name = ctl.Name
			completed = map[string]int{"none": 2, "guard": 9}[ctl.Name]
		}
		calls = append(calls, fmt.Sprintf("%d/%s", i, name))
		return &measure{window: time.Second, completed: completed, lat: ms(1, 1)}, nil
	}
	err := opt.matrix(res, []string{"a", "b"}, []Controller{{Name: "none"}, {Name: "guard"}}, run, func() error { afters++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0/normal", "0/none", "0/guard", "1/normal", "1/none", "1/guard"}; !slices.Equal(calls, want) {
		t.Errorf("runs %v, want %v", calls, want)
	}
	if afters != 2 || len(res.Rows) != 4 {
		t.Fatalf("afters %d, rows %d; want 2 and 4", afters, len(res.Rows))
	}
	g := res.Rows[3]
	if g.Suite != SuiteMySQL || g.Case != "b" || g.Controller != "guard" || g.ThroughputNorm != 0.9 {
		t.Errorf("row %+v: want b/guard of suite mysql at 0.9 of normal", g)
	}
	if res.Rows[0].Degraded == nil || !*res.Rows[0].Degraded {
		t.Errorf("the uncontrolled row carries no sanity check: %+v", res.Rows[0])
	}
	boom := errors.New("sysbench: exit status 1")
	err = opt.matrix(&bench.Results{}, []string{"a"}, []Controller{{Name: "guard"}}, func(i int, ctl *Controller) (*measure, error) {
		if ctl != nil {
			return nil, boom
		}
		return &measure{window: time.Second, completed: 1}, nil
	}, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "a/guard") {
		t.Errorf("error %v, want the run's error naming a/guard", err)
	}
}

// TestMatrixRounds: with Rounds, the normal run and the controllers run
// interleaved, round after round, and each row pools its rounds as one
// long run; with NoCulprit, the rows say so and carry no sanity check.
func TestMatrixRounds(t *testing.T) {
	opt := Options{Rounds: 2, NoCulprit: true}
	opt.defaults()
	var calls []string
	n := 0
	res := &bench.Results{Suite: SuitePostgres}
	err := opt.matrix(res, []string{"a"}, []Controller{{Name: "none"}, {Name: "guard"}}, func(i int, ctl *Controller) (*measure, error) {
		n++
		if ctl == nil {
			calls = append(calls, "normal")
			return &measure{window: time.Second, completed: 10, lat: ms(1)}, nil
		}
		calls = append(calls, ctl.Name)
		if ctl.Name == "guard" {
			// 8 then 10 of the normal 10: 0.9 pooled; latencies 3 and 6.
			return &measure{window: time.Second, completed: map[int]int{3: 8, 6: 10}[n], lat: ms(float64(n)), cancels: 1, victimCancels: 1}, nil
		}
		return &measure{window: time.Second, completed: 10, lat: ms(1)}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"normal", "none", "guard", "normal", "none", "guard"}; !slices.Equal(calls, want) {
		t.Errorf("runs %v, want %v", calls, want)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(res.Rows))
	}
	g := res.Rows[1]
	if g.ThroughputNorm != 0.9 || g.Cancelled != 2 || g.VictimsCancelled != 2 || g.P99Norm != 6 {
		t.Errorf("pooled row %+v: want throughput_norm 0.9, 2 cancels of victims, p99_norm 6 (of latencies 3 and 6)", g)
	}
	for _, r := range res.Rows {
		if !r.NoCulprit || r.Degraded != nil {
			t.Errorf("row %s: no_culprit %v, degraded %v; want true and no sanity check", r.Controller, r.NoCulprit, r.Degraded)
		}
	}
}

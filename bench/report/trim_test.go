package report

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/bench"
)

// withPathfence returns synthetic results plus a pathfence case whose runs
// the figure draws, one it leaves out (a fixed-K sweep) and runs of every
// event kind.
func withPathfence() *bench.Results {
	r := synthetic()
	r.Rows = append(r.Rows, pfRows()...)
	for _, ctl := range []string{"shared", "pathfence-sct", "fixed-8"} {
		for _, p := range pathOrder {
			r.Runs = append(r.Runs, bench.Run{Case: "millibottleneck", Controller: ctl, Path: p, Duration: 2 * time.Second, SeriesStep: time.Second,
				Series: []bench.Point{{T: 0, P99Ms: 10, Throughput: 5}, {T: time.Second, P99Ms: 300, Throughput: 2}},
				Events: []bench.Event{{T: 500 * time.Millisecond, Kind: stallEvent, Delay: 300 * time.Millisecond}, {T: time.Second, Kind: "reject"}}})
		}
	}
	return r
}

func TestSaveTrimmed(t *testing.T) {
	r := withPathfence()
	before := cloneResults(t, r)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := SaveTrimmed(path, r); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, r); diff != "" {
		t.Errorf("SaveTrimmed changed its argument:\n%s", diff)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Rows, got.Rows); diff != "" {
		t.Errorf("rows (-saved +loaded):\n%s", diff)
	}
	if got.NumRuns() != len(r.Runs) {
		t.Errorf("NumRuns() = %d, want %d", got.NumRuns(), len(r.Runs))
	}
	for _, run := range got.Runs {
		if run.Case != "millibottleneck" || !pathfenceDrawn(&run) {
			t.Errorf("kept run %s/%s/%s, which no figure draws", run.Case, run.Controller, run.Path)
		}
		if slices.ContainsFunc(run.Events, func(e bench.Event) bool { return e.Kind != stallEvent }) {
			t.Errorf("kept events %v; the figure reads only stalls", run.Events)
		}
	}
	if want := 2 * len(pathOrder); len(got.Runs) != want {
		t.Errorf("kept %d runs, want %d (shared and pathfence-sct per path)", len(got.Runs), want)
	}

	// The reports read the same from the trimmed results.
	var full, trimmed bytes.Buffer
	if err := Markdown(&full, r); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&trimmed, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full.String(), trimmed.String()); diff != "" {
		t.Errorf("Markdown (-full +trimmed):\n%s", diff)
	}
	if diff := cmp.Diff(PathfenceFigures(r), PathfenceFigures(got)); diff != "" {
		t.Errorf("figures (-full +trimmed):\n%s", diff)
	}

	// Trimming the trimmed file writes the same bytes.
	first, _ := os.ReadFile(path)
	if err := SaveTrimmed(path, got); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(path); !bytes.Equal(first, second) {
		t.Errorf("trimming twice differs:\n%s\n%s", first, second)
	}
}

// TestWriteCompactRoundTrip checks that the compact form reads back to the
// same results, zeros (left out) and pointers to zero (kept) included, on
// generated rows.
func TestWriteCompactRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 50 {
		r := withPathfence()
		for j := range r.Rows {
			row := &r.Rows[j]
			// Zero some numbers, keep others: both forms must survive.
			if rng.IntN(2) == 0 {
				row.ThroughputNorm, row.Cancelled = 0, 0
			}
			if rng.IntN(3) == 0 {
				zero := 0.0
				row.InterferenceReduction = &zero
			}
			if rng.IntN(3) == 0 {
				f := false
				row.Degraded = &f
			}
			row.P99Norm = rng.Float64() * 1000
		}
		if i%2 == 1 {
			r.Runs = nil
		}
		var b bytes.Buffer
		if err := WriteCompact(&b, r); err != nil {
			t.Fatal(err)
		}
		got, err := decode(b.Bytes())
		if err != nil {
			t.Fatalf("%v:\n%s", err, b.String())
		}
		if r.Runs == nil {
			r.Runs = []bench.Run{}
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Fatalf("round %d (-written +read):\n%s", i, diff)
		}
	}
}

func cloneResults(t *testing.T, r *bench.Results) *bench.Results {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCompact(&b, r); err != nil {
		t.Fatal(err)
	}
	c, err := decode(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

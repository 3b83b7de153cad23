package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func checkByName(cs []SoakCheck, name string) SoakCheck {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return SoakCheck{Name: name, Text: "missing"}
}

func TestSoakChecks(t *testing.T) {
	o := SoakOptions{Cases: []Case{{Name: "a", SLO: 50 * time.Millisecond}}, Warmup: 10 * time.Second}
	samples := func(grow func(i int) SoakSample) []SoakSample {
		var out []SoakSample
		for i := range 60 {
			s := grow(i)
			s.T = time.Duration(i) * time.Second
			out = append(out, s)
		}
		return out
	}
	var runs []SoakRun
	for i, p := range []float64{10, 11, 90, 9, 10, 12, 10} { // one bad run is no drift
		runs = append(runs, SoakRun{Case: "a", Start: time.Duration(i*8) * time.Second, P99Ms: p})
	}

	flat := &SoakResult{Runs: runs, Samples: samples(func(i int) SoakSample {
		return SoakSample{Goroutines: 200 + i%7, HeapLive: 20 << 20, FDs: 40, Live: 5}
	})}
	for _, c := range soakChecks(o, flat) {
		if !c.OK {
			t.Errorf("flat soak: check %s failed: %s", c.Name, c.Text)
		}
	}

	// A goroutine leak of 10 a second, a growing heap, a victim, a leaked
	// slot and a p99 that drifts.
	drifting := []SoakRun{{Case: "a", Start: 12 * time.Second, P99Ms: 10}, {Case: "a", Start: 20 * time.Second, P99Ms: 12},
		{Case: "a", Start: 40 * time.Second, P99Ms: 300}, {Case: "a", Start: 50 * time.Second, P99Ms: 400, Victims: 1, LeakedSlots: 2}}
	leaky := &SoakResult{Runs: drifting,
		Samples: samples(func(i int) SoakSample {
			return SoakSample{Goroutines: 200 + 10*i, HeapLive: uint64(20+i) << 20, FDs: 40, Live: 5}
		})}
	cs := soakChecks(o, leaky)
	for _, name := range []string{"goroutines", "heap", "victims", "slots", "p99"} {
		if c := checkByName(cs, name); c.OK {
			t.Errorf("leaky soak: check %s passed: %s", name, c.Text)
		}
	}
	for _, name := range []string{"descriptors", "live tasks", "tasks", "runs"} {
		if c := checkByName(cs, name); !c.OK {
			t.Errorf("leaky soak: check %s failed: %s", name, c.Text)
		}
	}
	if r := (&SoakResult{Checks: cs}); r.OK() {
		t.Error("OK() with failed checks")
	}
	// Between rounds the descriptors climb while the per-second samples,
	// dominated by the load, look flat: the boundaries decide.
	var bounds []SoakSample
	for i := range 9 {
		bounds = append(bounds, SoakSample{T: time.Duration(10+5*i) * time.Second, Goroutines: 12, HeapLive: 3 << 20, FDs: 20 + 5*i})
	}
	flat.Boundaries = bounds
	if c := checkByName(soakChecks(o, flat), "descriptors"); c.OK || !strings.Contains(c.Text, "between rounds") {
		t.Errorf("a descriptor leak between rounds passed: %s", c.Text)
	}
	if c := checkByName(soakChecks(o, flat), "goroutines"); !c.OK {
		t.Errorf("flat goroutines between rounds failed: %s", c.Text)
	}
	if c := checkByName(soakChecks(o, &SoakResult{}), "goroutines"); c.OK || !strings.Contains(c.Text, "too few") {
		t.Errorf("no samples: %+v", c)
	}
}

func TestSoakRoundRunsProcessWideCasesAlone(t *testing.T) {
	cases := []Case{{Name: "a"}, {Name: "b"}, {Name: "cpu", ProcessWide: true}, {Name: "c"}, {Name: "heap", ProcessWide: true}, {Name: "d"}}
	next := 0
	var got [][]string
	for range 6 {
		var names []string
		for _, c := range soakRound(cases, &next, 3) {
			names = append(names, c.Name)
		}
		got = append(got, names)
	}
	want := [][]string{{"a", "b"}, {"cpu"}, {"c"}, {"heap"}, {"d", "a", "b"}, {"cpu"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rounds (-want +got):\n%s", diff)
	}
	next = 0
	for range 4 {
		if r := soakRound(cases[:2], &next, 3); len(r) != 2 {
			t.Fatalf("round of two cases with parallel 3 = %d cases", len(r))
		}
	}
}

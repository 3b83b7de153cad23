// Package seeds gives the guard's generated tests their seeds: 1..n, or
// the one seed of $MOIRAI_SEED, so that a failure printed with its seed
// replays alone.
package seeds

import (
	"os"
	"strconv"
	"testing"
)

// Of returns the seeds 1..n, or only $MOIRAI_SEED when it is set (a bad
// value fails t).
func Of(t testing.TB, n int) []uint64 {
	t.Helper()
	if s := os.Getenv("MOIRAI_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MOIRAI_SEED=%q: %v", s, err)
		}
		return []uint64{v}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

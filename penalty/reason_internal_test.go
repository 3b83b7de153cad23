package penalty

import (
	"math"
	"strings"
	"testing"
)

// TestDeferralInUserTerms checks that a penalty's reason speaks of time
// deferred per second run, never of the formula's symbols or infinity.
func TestDeferralInUserTerms(t *testing.T) {
	for _, tc := range []struct {
		tf   float64
		want string
	}{
		{math.Inf(1), "task 7 has only waited so far, where it tolerates 0.50 s deferred per second it runs"},
		{3.1, "task 7 was deferred 3.10 s per second it ran, more than the 0.50 s it tolerates"},
	} {
		got := deferral(7, tc.tf, 0.5)
		if got != tc.want {
			t.Errorf("deferral(7, %v, 0.5) = %q, want %q", tc.tf, got, tc.want)
		}
		for _, bad := range []string{"t_f", "Inf", "goal", "λ"} {
			if strings.Contains(got, bad) {
				t.Errorf("deferral(7, %v, 0.5) = %q: says %q", tc.tf, got, bad)
			}
		}
	}
}

package baseline_test

import (
	"testing"
	"time"

	"github.com/moirai-go/moirai/bench/baseline"
)

func TestRandomShrinksUnderOverload(t *testing.T) {
	r := baseline.NewRandom(0, 0, 0)
	now := time.Duration(0)
	for w := 0; w < 20; w++ {
		for i := 0; i < 2000; i++ {
			if r.Admit(now) {
				r.Started(now, 50*time.Millisecond)
			}
			now += 500 * time.Microsecond
		}
	}
	if f := r.Fraction(); f > 0.5 {
		t.Fatalf("Fraction() = %v after 20 overloaded windows", f)
	}
}

func TestSREThrottlesWhenRejected(t *testing.T) {
	s := baseline.NewSRE(2, time.Minute)
	now := time.Duration(0)
	for i := 0; i < 1000; i++ {
		s.Record(now, i%10 == 0) // 10 % accepted
		now += time.Millisecond
	}
	p := s.RejectProbability(now)
	// (1000 - 2*100) / 1001
	if p < 0.79 || p > 0.81 {
		t.Fatalf("RejectProbability = %v, want about 0.8", p)
	}
	// After the window passes without traffic the history is gone.
	if p := s.RejectProbability(now + 2*time.Minute); p != 0 {
		t.Fatalf("RejectProbability after the window = %v, want 0", p)
	}
	// All accepted: never throttled.
	s2 := baseline.NewSRE(0, 0)
	for i := 0; i < 100; i++ {
		s2.Record(time.Duration(i)*time.Millisecond, true)
	}
	if !s2.Allow(time.Second) {
		t.Fatal("Allow refused with all requests accepted")
	}
}

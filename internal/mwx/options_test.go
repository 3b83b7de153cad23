package mwx

import (
	"testing"
	"time"

	"github.com/moirai-go/moirai/admit"
)

func TestLevelsBoundAndExpiry(t *testing.T) {
	l := Levels{Max: 2}
	lv := admit.Level{Business: 3, User: 4}
	if !l.Put("a", lv, time.Hour) || !l.Put("b", lv, time.Hour) {
		t.Fatal("the first two downstreams are not cached")
	}
	if l.Put("c", lv, time.Hour) {
		t.Fatal("a third downstream is cached past Max")
	}
	if !l.Put("a", admit.Level{}, time.Hour) {
		t.Fatal("a cached downstream's level is not replaced at the bound")
	}
	if got, ok := l.Get("a"); !ok || got != (admit.Level{}) {
		t.Fatalf("a: %v %v, want the replaced level", got, ok)
	}
	if _, ok := l.Get("c"); ok {
		t.Fatal("c was not cached, yet found")
	}
	l.Put("b", lv, -time.Nanosecond)
	if _, ok := l.Get("b"); ok {
		t.Fatal("an expired level is used")
	}
}

func TestApplySkipsNil(t *testing.T) {
	type opt func(*Server)
	s := DefaultServer()
	Apply(&s, []opt{nil, func(s *Server) { s.SetCancellable(false) }, nil})
	if s.Cancellable || !s.CancellableSet {
		t.Fatalf("options not applied: %+v", s)
	}
}

package tree_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/tree"
)

func TestNewParses(t *testing.T) {
	for _, class := range []string{"", "/pkg.Svc/Method", "GET /users/{id}", "a;b\x00c", strings.Repeat("x", 300)} {
		v := tree.New(class)
		if !tree.Parse(v) {
			t.Fatalf("New(%q) = %q does not parse", class, v)
		}
		_, got := tree.Split(v)
		if len(got) > tree.MaxClass || strings.ContainsAny(got, ";\x00") {
			t.Fatalf("New(%q): class %q", class, got)
		}
	}
	if a, b := tree.New("c"), tree.New("c"); a == b {
		t.Fatalf("two trees with one identity %q", a)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"abc.1 /m", true},
		{"abc.1 ", true},
		{"abc.1", false},
		{" /m", false},
		{"ABC /m", false},
		{"abc /m;x", false},
		{"abc /m\x7f", false},
		{strings.Repeat("a", tree.MaxID+1) + " m", false},
		{"a " + strings.Repeat("m", tree.MaxClass+1), false},
	} {
		if got := tree.Parse(tc.v); got != tc.want {
			t.Errorf("Parse(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestCulpritRoundTrip(t *testing.T) {
	c := tree.Answer(tree.New("/f/Root"), "backend b", "holds lock; 3 wait", 1500*time.Millisecond)
	if c.Hop != "backend_b" {
		t.Fatalf("hop %q", c.Hop)
	}
	got, ok := tree.ParseCulprit(c.Format())
	if !ok || *got != *c {
		t.Fatalf("ParseCulprit(%q) = %+v, %v; want %+v", c.Format(), got, ok, c)
	}
	err := fmt.Errorf("call: %w", c)
	if g, ok := tree.Of(err); !ok || g != c || !errors.Is(err, tree.ErrCulprit) {
		t.Fatalf("Of(%v) = %v, %v", err, g, ok)
	}
	if _, ok := tree.Of(errors.New("x")); ok {
		t.Fatal("Of found a culprit in an ordinary error")
	}
	for _, bad := range []string{"", "a m;1;h", "a m;x;h;r", "a m;1; ;r", "a m;99999999;h;r", "a m;3600001;h;r", "a m;1;;r", "a m;-1;h;r", "a m;1;h;r\n"} {
		if c, ok := tree.ParseCulprit(bad); ok {
			t.Errorf("ParseCulprit(%q) = %+v, want refused", bad, c)
		}
	}
}

// FuzzParseCulprit: whatever a downstream answers, a culprit is accepted
// only when it is well formed, within its bounds, and reads back as what
// it spells.
func FuzzParseCulprit(f *testing.F) {
	f.Add("abc.1 /m;250;b;lock held")
	f.Add("abc.1 /m;3600000;b;")
	f.Add("abc.1 /m;0;b;r;s;t")
	f.Add(";;;")
	f.Add("a b;1;h;\xff")
	f.Fuzz(func(t *testing.T, v string) {
		c, ok := tree.ParseCulprit(v)
		if !ok {
			return
		}
		if !tree.Parse(c.Tree) || c.Hop == "" || len(c.Hop) > tree.MaxHop || strings.ContainsAny(c.Hop, " ;") ||
			len(c.Reason) > tree.MaxReason || c.Wait < 0 || c.Wait > tree.MaxWait {
			t.Fatalf("ParseCulprit(%q) accepted %+v", v, c)
		}
		again, ok := tree.ParseCulprit(c.Format())
		if !ok || *again != *c {
			t.Fatalf("%q: %+v formats as %q, which reads %+v, %v", v, c, c.Format(), again, ok)
		}
	})
}

// FuzzParse: an identity is accepted only within its bounds, and its
// parts are what Split returns.
func FuzzParse(f *testing.F) {
	f.Add("abc.1 /m")
	f.Add("a ")
	f.Add("a;b c")
	f.Fuzz(func(t *testing.T, v string) {
		if !tree.Parse(v) {
			return
		}
		id, class := tree.Split(v)
		if id == "" || len(id) > tree.MaxID || len(class) > tree.MaxClass || id+" "+class != v || strings.Contains(v, ";") {
			t.Fatalf("Parse(%q) accepted id %q class %q", v, id, class)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	v := tree.New("/pkg.Svc/Method")
	b.ReportAllocs()
	for b.Loop() {
		if !tree.Parse(v) {
			b.Fatal("no parse")
		}
	}
}

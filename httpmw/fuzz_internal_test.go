package httpmw

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/moirai-go/moirai/tree"
)

// FuzzTreeHeader: whatever a caller puts in the tree header, the request
// joins that tree only when the caller is trusted and the header is one
// well-formed identity; otherwise it is the root of a new tree.
func FuzzTreeHeader(f *testing.F) {
	for _, s := range []string{"abc.1 GET /x", "abc.1 ", "ABC /m", "", " ", "a;b c", "a\x00 m"} {
		f.Add(s, "", true)
		f.Add(s, "abc.2 /n", true)
		f.Add(s, "", false)
	}
	f.Fuzz(func(t *testing.T, v, second string, trusted bool) {
		h := &handler{cfg: defaults()}
		WithTree("hop")(&h.cfg)
		WithTrustedPeer(func(*http.Request) bool { return trusted })(&h.cfg)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header[tree.Header] = []string{v}
		if second != "" {
			r.Header[tree.Header] = append(r.Header[tree.Header], second)
		}
		got, in := h.treeOf(r, "GET /")
		want := trusted && second == "" && tree.Parse(v)
		if in != want || (in && got != v) {
			t.Fatalf("tree %q (then %q), trusted %v: joined %q (%v), want joined %v", v, second, trusted, got, in, want)
		}
		if !in && (!tree.Parse(got) || got == v) {
			t.Fatalf("tree %q refused, but the new tree %q is not a fresh identity", v, got)
		}
	})
}

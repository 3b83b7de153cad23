package httpmw_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"github.com/moirai-go/moirai/tree"
)

// BenchmarkTreeHandler is the handler on a request from a trusted peer
// that carries a priority and a tree's identity: baseline ignores the
// identity, moirai joins the tree.
func BenchmarkTreeHandler(b *testing.B) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	trusted := httpmw.WithTrustedPeer(func(*http.Request) bool { return true })
	class := httpmw.WithClass(func(*http.Request) string { return "GET /x" })
	for _, bc := range []struct {
		name string
		opts []httpmw.Option
	}{{"baseline", []httpmw.Option{trusted, class}}, {"moirai", []httpmw.Option{trusted, class, httpmw.WithTree("b")}}} {
		b.Run(bc.name, func(b *testing.B) {
			h := httpmw.Handler(ctl, next, bc.opts...)
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r.Header.Set(httpmw.HeaderPriority, "3/4")
			r.Header.Set(tree.Header, tree.New("GET /front"))
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkTreeTransport is the client transport on a request of a task
// that serves no tree (baseline) or one (moirai), over a round tripper
// that answers at once.
func BenchmarkTreeTransport(b *testing.B) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	for _, bc := range []struct {
		name string
		tree string
		opts []httpmw.TransportOption
	}{{"baseline", "", []httpmw.TransportOption{httpmw.WithoutLocalShedding()}},
		{"moirai", tree.New("GET /front"), []httpmw.TransportOption{httpmw.WithoutLocalShedding(), httpmw.WithTreeCancel(ctl, func(string) bool { return true })}}} {
		b.Run(bc.name, func(b *testing.B) {
			rt := httpmw.Transport(base, bc.opts...)
			ctx, t := ctl.Begin(context.Background(), moirai.Spec{Tree: bc.tree})
			defer t.End(nil)
			r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://b/x", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package otelmoirai

import (
	"bytes"
	"context"
	"net/http"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/httpmw"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Handler returns next wrapped so that the request's span shows what
// moirai did to the request. It has a job on each side of httpmw's
// Handler, and goes on both for the whole picture:
//
//   - inside it (around the mux's handlers, or around the mux with
//     httpmw.WithClass), where the request is a task: it runs the request
//     under [Telemetry.Track], so its span gets the cancellation or the
//     penalty, and a re-execution its own span;
//   - outside it (between otelhttp and httpmw), where no task has begun
//     yet: a request httpmw's admission control rejects (503 with the
//     level header, before any task begins) gets moirai.action=reject,
//     moirai.policy=admission, moirai.admission.level and an Error
//     status.
//
// httpmw derives a request's class from the mux's route pattern only when
// it wraps the *http.ServeMux itself: wrap the handlers you register
// rather than the mux, as in the package example, to keep that default.
// It panics if next is nil, as http.Handle does.
func (t *Telemetry) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("otelmoirai: nil handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tk := moirai.From(r.Context()); tk != nil { // Track, without its closure
			ctx, own := t.start(r.Context(), tk)
			defer t.finish(ctx, tk, own)
			if ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
			return
		}
		rw := &rejectWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if rw.level != "" {
			t.Rejected(r.Context(), rw.level)
		}
	})
}

// admissionBody is how httpmw's answer to a request its admission
// control rejects begins (a fence's rejection, also a 503 with the level
// header, says "overloaded: path's line full").
var admissionBody = []byte("overloaded: request rejected by admission control")

// rejectWriter notices httpmw's answer to a request its admission control
// rejected: a 503 with the level header, whose body says so.
type rejectWriter struct {
	http.ResponseWriter
	status int
	level  string
}

func (w *rejectWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rejectWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	} else if w.status == http.StatusServiceUnavailable && w.level == "" && bytes.HasPrefix(b, admissionBody) {
		w.level = w.Header().Get(httpmw.HeaderLevel)
	}
	w.status = -1 // only the first write of the body is looked at
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher when the wrapped writer does.
func (w *rejectWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *rejectWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Rejected records on the span ctx carries that admission control
// rejected the request at level ("B/U", as admit.FormatLevel writes it):
// moirai.action=reject, moirai.policy=admission, moirai.admission.level
// and an Error status. [Telemetry.Handler] calls it for httpmw's
// rejections; a gRPC interceptor chained before grpcmw's calls it when
// grpcmw answers ResourceExhausted with "overloaded: call rejected by
// admission control" (the level is the admitter's, admit.FormatLevel of
// its Level()).
func (t *Telemetry) Rejected(ctx context.Context, level string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrAction.String("reject"), AttrPolicy.String("admission"), AttrLevel.String(level))
	span.SetStatus(codes.Error, "moirai: rejected by admission control at level "+level)
}

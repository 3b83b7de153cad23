package guard

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Escape returns s safe to print, log or store: every C0 control
// character (newlines and tabs included), DEL, every C1 control character
// (U+0080–U+009F: U+009B is an 8-bit CSI that a terminal obeys like ESC
// [), every bidirectional control (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069: they reorder what the reader sees), the
// line and paragraph separators, and every byte that is not UTF-8 (a raw
// 0x9B is a CSI to a terminal in an 8-bit mode) is written as a visible
// escape: \x1b, \u009b, \u202e. Anything else is kept, so a printable
// string is returned unchanged.
//
// It is the one escaping function of the guard's outputs: every string
// a server supplies (names, users, applications, statements, states,
// lock modes, error messages) passes through it before it reaches the
// text and JSON outputs, the audit file, the logs or a metric's label.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafeRune(r, n):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r, n):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether the rune r, of n bytes, is one Escape
// escapes.
func unsafeRune(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// escapeAll applies Escape to every string v holds — struct fields, slice
// and array elements, map keys and values, through pointers and
// interfaces — and returns the escaped copy (v itself is not changed).
// Unexported fields are kept as they are: no output shows them.
func escapeAll[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	rv.Set(escapeValue(rv, 0))
	return v
}

// maxDepth bounds escapeValue's walk (a cyclic value ends there).
const maxDepth = 32

func escapeValue(v reflect.Value, depth int) reflect.Value {
	if depth > maxDepth || !v.IsValid() {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		if e := Escape(v.String()); e != v.String() {
			out := reflect.New(v.Type()).Elem()
			out.SetString(e)
			return out
		}
		return v
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(escapeValue(v.Elem(), depth+1))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(escapeValue(v.Elem(), depth+1))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range out.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(escapeValue(f, depth+1))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(escapeValue(v.Index(i), depth+1))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(escapeValue(v.Index(i), depth+1))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(escapeValue(it.Key(), depth+1), escapeValue(it.Value(), depth+1))
		}
		return out
	}
	return v
}

// escapingHandler is a slog.Handler that escapes every string of a
// record — its message, attribute keys and values, errors' messages and
// groups' names — before the handler it wraps formats it.
type escapingHandler struct{ h slog.Handler }

// escaping returns l logging through an escapingHandler (once).
func escaping(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(escapingHandler); ok {
		return l
	}
	return slog.New(escapingHandler{l.Handler()})
}

func (e escapingHandler) Enabled(ctx context.Context, l slog.Level) bool { return e.h.Enabled(ctx, l) }

func (e escapingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Escape(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(escapeAttr(a))
		return true
	})
	return e.h.Handle(ctx, out)
}

func (e escapingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	es := make([]slog.Attr, len(as))
	for i, a := range as {
		es[i] = escapeAttr(a)
	}
	return escapingHandler{e.h.WithAttrs(es)}
}

func (e escapingHandler) WithGroup(name string) slog.Handler {
	return escapingHandler{e.h.WithGroup(Escape(name))}
}

func escapeAttr(a slog.Attr) slog.Attr {
	a.Key = Escape(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(Escape(v.String()))
	case slog.KindGroup:
		g := v.Group()
		es := make([]slog.Attr, len(g))
		for i, x := range g {
			es[i] = escapeAttr(x)
		}
		a.Value = slog.GroupValue(es...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			a.Value = slog.StringValue(Escape(x.Error()))
		case fmt.Stringer:
			a.Value = slog.StringValue(Escape(x.String()))
		default:
			a.Value = slog.AnyValue(escapeAll(x))
		}
	default:
		a.Value = v
	}
	return a
}

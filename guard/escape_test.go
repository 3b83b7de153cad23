package guard

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"accounts", "accounts"},
		{"résumé 表", "résumé 表"},
		{"t\x1b[2Jx", `t\x1b[2Jx`},
		{"t\u009b2Jx", `t\u009b2Jx`}, // the 8-bit CSI, as UTF-8
		{"t\x9b2Jx", `t\x9b2Jx`},     // the 8-bit CSI, a raw byte
		{"a\u202eb\u2066c", `a\u202eb\u2066c`},
		{"line\nforged=1\r\t", `line\x0aforged=1\x0d\x09`},
		{"\x7f\u0085\u2028", `\x7f\u0085\u2028`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// forbidden returns the first C0 or C1 control character, DEL,
// bidirectional control, line separator or non-UTF-8 byte of s other
// than the ones in allowed.
func forbidden(s, allowed string) (rune, bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return rune(s[i]), true
		}
		// The oracle's own list, apart from Escape's: unicode's control
		// category is C0, DEL and C1.
		bad := unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
		if bad && !strings.ContainsRune(allowed, r) {
			return r, true
		}
		i += n
	}
	return 0, false
}

// FuzzEscape: Escape's output never holds a character it must escape, is
// valid UTF-8, is a fixed point, and keeps a safe string unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;title\x07", "\u009b31m", "\x9b31m", "\u202egnp.exe", "a\nb", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if r, bad := forbidden(e, ""); bad {
			t.Fatalf("Escape(%q) = %q holds %U", s, e, r)
		}
		if !utf8.ValidString(e) || Escape(e) != e {
			t.Fatalf("Escape(%q) = %q: not valid UTF-8 or not a fixed point", s, e)
		}
		if _, bad := forbidden(s, ""); !bad && e != s {
			t.Fatalf("Escape changed the safe %q into %q", s, e)
		}
	})
}

// hostile puts the server string x everywhere a server supplies one in
// lockTable's observations: names, users, applications, states,
// statements, lock modes, wait events, the database.
func hostile(x string) func(int, time.Time) *Observation {
	base := lockTable(nil)
	return func(n int, at time.Time) *Observation {
		o := base(n, at)
		res := map[string]string{}
		for i := range o.Resources {
			res[o.Resources[i].Name] = o.Resources[i].Name + x
			o.Resources[i].Name += x
		}
		for i := range o.Uses {
			o.Uses[i].Resource = res[o.Uses[i].Resource]
			o.Uses[i].Mode += x
		}
		for i := range o.Sessions {
			s := &o.Sessions[i]
			s.User += x
			s.Application += x
			s.State += x
			s.Query += " /*" + x + "*/"
			s.Database = "app" + x
			s.ClientAddr = x
			s.WaitEvent = x
		}
		o.Sessions[len(o.Sessions)-3].Superuser = true // the ALTER: a no-action root if it roots a chain
		o.Skipped = map[string]int{x: 1}
		return o
	}
}

// FuzzGuardOutputs runs the guard on a server whose every string is the
// fuzzer's, failing polls with it too, and checks that no output — the
// decisions' text and JSON, the explanation's text and JSON, the audit
// file, the log, the metrics — carries a control character or a bidi
// override: only the outputs' own line ends.
func FuzzGuardOutputs(f *testing.F) {
	for _, s := range []string{"", "\x1b[2J", "\u009b2J", "\x9b2J", "\u202e", "\n", "x\x00y", "\u2028\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, x string) {
		src := &fake{obs: hostile(x), down: func(n int) bool { return n == 2 }}
		src.downErr = "server said: " + x
		var audit, logs, logsJSON bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		reg := prometheus.NewRegistry()
		g, err := New(src, Options{Database: "app" + x, Audit: &audit, Logger: logger, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		var ds []Decision
		for range 7 {
			d, _ := g.Step(t.Context())
			ds = append(ds, d...)
		}
		if len(ds) == 0 || len(src.cancelled()) != 1 {
			t.Fatalf("decisions %+v: the culprit was not cancelled, the outputs show little", ds)
		}
		escaping(slog.New(slog.NewJSONHandler(&logsJSON, nil))).Info(x, x, x, "err", errorString(x), "any", map[string]any{x: []string{x}})
		var text, js, xtext bytes.Buffer
		if err := WriteDecisions(&text, ds); err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(&js).Encode(ds); err != nil {
			t.Fatal(err)
		}
		ex := g.Explain()
		if err := ex.WriteText(&xtext); err != nil {
			t.Fatal(err)
		}
		xjs, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		var prom bytes.Buffer
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&prom, mf); err != nil {
				t.Fatal(err)
			}
		}
		for name, out := range map[string]string{"decisions text": text.String(), "decisions JSON": js.String(),
			"explain text": xtext.String(), "explain JSON": string(xjs), "audit": audit.String(), "log": logs.String(),
			"JSON log": logsJSON.String(), "metrics": prom.String()} {
			if r, bad := forbidden(out, "\n"); bad {
				t.Fatalf("%s holds %U from the server string %q:\n%s", name, r, x, out)
			}
		}
		if n := strings.Count(audit.String(), "\n"); n != len(ds) {
			t.Fatalf("%d audit lines for %d decisions: a server string broke a line", n, len(ds))
		}
		for _, l := range strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n") {
			if !strings.HasPrefix(l, "time=") {
				t.Fatalf("log line %q: a server string broke a line", l)
			}
		}
	})
}

type errorString string

func (e errorString) Error() string { return string(e) }

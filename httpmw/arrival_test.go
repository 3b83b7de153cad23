package httpmw_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/httpmw"
)

// TestForgedArrivalsDoNotCutTheLevel is a forged-arrival attack: honest
// requests, one a millisecond, each queued 2 ms, and one request per 50 ms
// window claiming (in X-Request-Start) to have arrived in 1970. The
// forged delays must not make calm windows look overloaded: no honest
// request is refused and the level stays fully open. Then the same
// requests queued 40 ms (twice the threshold), honestly: the level falls
// and requests are refused, so the arrival time is still read.
func TestForgedArrivalsDoNotCutTheLevel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0))
		ctl := moirai.New(moirai.WithoutMechanisms(), moirai.WithTick(time.Millisecond, time.Millisecond))
		defer ctl.Close()
		d := admit.NewDAGOR(admit.WithWindow(50*time.Millisecond, 2000))
		h := httpmw.Handler(ctl, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			httpmw.WithAdmission(d), httpmw.WithArrival(httpmw.RequestStart("x-request-start")),
			httpmw.WithPriority(func(*http.Request) moirai.Priority {
				return moirai.Priority{Business: uint8(rng.IntN(admit.BusinessLevels)), User: uint8(rng.IntN(admit.UserLevels))}
			}))
		send := func(start string) int {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-Request-Start", start)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		run := func(queued time.Duration, forge bool) (honest, refused int) {
			for ms := range 1100 {
				time.Sleep(time.Millisecond)
				if forge && ms%50 == 25 {
					send("t=0") // 1970
				}
				honest++
				if send("t="+strconv.FormatInt(time.Now().Add(-queued).UnixMicro(), 10)) != http.StatusOK {
					refused++
				}
			}
			return honest, refused
		}
		clamped := httpmw.ClampedArrivals()
		honest, refused := run(2*time.Millisecond, true)
		if n := httpmw.ClampedArrivals() - clamped; n != 22 {
			t.Errorf("%d arrivals clamped, want the 22 forged ones", n)
		}
		t.Logf("forged 1970 arrivals: %d of %d honest requests refused, level %v", refused, honest, d.Level())
		if refused != 0 || d.Level() != admit.AdmitAll {
			t.Errorf("forged arrivals: %d of %d honest requests refused, level %v; want none, %v",
				refused, honest, d.Level(), admit.AdmitAll)
		}
		honest, refused = run(40*time.Millisecond, false)
		t.Logf("honest 40 ms queueing: %d of %d refused, level %v", refused, honest, d.Level())
		if refused == 0 || d.Level() == admit.AdmitAll {
			t.Errorf("honest overload: %d of %d refused, level %v; want the level to fall", refused, honest, d.Level())
		}
	})
}

func TestParseRequestStart(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 123456000, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"t=1795608000123456", at, true}, // microseconds (HAProxy, Heroku)
		{"1795608000123", at.Truncate(time.Millisecond), true},
		{"t=1795608000.123456", at, true}, // nginx t=${msec}
		{"1795608000.123", at.Truncate(time.Millisecond), true},
		{"1795608000", at.Truncate(time.Second), true},
		{"1795608000123456000", at, true}, // nanoseconds
		{"t=0", time.Unix(0, 0), true},    // 1970: parsed; WithArrival bounds it
		{"", time.Time{}, false},
		{"t=", time.Time{}, false},
		{"-1", time.Time{}, false},
		{"+1795608000", time.Time{}, false},
		{"1e9", time.Time{}, false},
		{"1795608000.", time.Time{}, false},
		{".5", time.Time{}, false},
		{"1.2.3", time.Time{}, false},
		{"t= 1795608000", time.Time{}, false},
		{"99999999999999999999", time.Time{}, false},
		{"9999999999999999999.5", time.Time{}, false},
	} {
		got, ok := httpmw.ParseRequestStart(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("ParseRequestStart(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseRequestStart: whatever a proxy (or a client past it) sends,
// the parser does not panic, accepts only digits with an optional "t="
// and one dot, and never returns a time before 1970.
func FuzzParseRequestStart(f *testing.F) {
	for _, s := range []string{"t=1795608000123456", "1795608000.123", "t=0", "", "-1", "1e9", "1.2.3", "\xff", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := httpmw.ParseRequestStart(s)
		if !ok {
			return
		}
		rest := strings.TrimPrefix(s, "t=")
		if strings.Trim(rest, "0123456789.") != "" || strings.Count(rest, ".") > 1 {
			t.Fatalf("%q accepted as %v", s, got)
		}
		if got.Before(time.Unix(0, 0)) {
			t.Fatalf("%q parsed before 1970: %v", s, got)
		}
	})
}

package httpmw_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/httpmw"
)

// requestStart reads X-Request-Start as "t=<microseconds since 1970>".
func requestStart(r *http.Request) (time.Time, bool) {
	v := r.Header.Get("X-Request-Start")
	if len(v) < 3 || v[:2] != "t=" {
		return time.Time{}, false
	}
	us, err := strconv.ParseInt(v[2:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMicro(us), true
}

// TestForgedArrivalsDoNotCutTheLevel is the attack of issue 30: honest
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
		ctl := moirai.New(moirai.WithTraceOnly(), moirai.WithTick(time.Millisecond, time.Millisecond))
		defer ctl.Close()
		d := admit.NewDAGOR(admit.WithDAGORWindow(50*time.Millisecond, 2000))
		h := httpmw.Handler(ctl, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			httpmw.WithAdmission(d), httpmw.WithArrival(requestStart),
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
		honest, refused := run(2*time.Millisecond, true)
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

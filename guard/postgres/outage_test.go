package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
)

// proxy forwards a loopback port to the test server; down drops every
// connection and refuses new ones (the server, as the guard sees a
// restart), up listens again on the same port.
type proxy struct {
	t      *testing.T
	addr   string // the proxy's host:port
	target string // the server's host:port
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
}

func (p *proxy) down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestServerOutage: the guard's connections are cut and the server
// refuses new ones for a while (a restart, from the guard's side). Polls
// fail with an error naming the connection, nothing is acted on, and once
// the server answers again the same source polls and acts on a culprit
// without being reopened.
func TestServerOutage(t *testing.T) {
	// A database of its own: the guard, scoped to it, sees and acts on
	// this test's sessions only, whatever else runs on the server.
	d := database(t, "outage") // skips without a server
	u, err := url.Parse(d)
	if err != nil || u.Host == "" {
		t.Skipf("the outage test needs a host:port DSN, not %q", d)
	}
	p := newProxy(t, u.Host)
	pu := *u
	pu.Host = p.addr
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, pu.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 200 * time.Millisecond, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Step(t.Context()); err != nil {
		t.Fatalf("poll before the outage: %v", err)
	}

	p.down()
	for range 3 {
		sctx, scancel := context.WithTimeout(t.Context(), 5*time.Second)
		ds, err := g.Step(sctx)
		scancel()
		if err == nil || len(ds) != 0 {
			t.Fatalf("poll during the outage: %v, decisions %+v; want an error and none", err, ds)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("poll during the outage hung until its deadline: %v", err)
		}
	}

	p.up()
	var polled bool
	for start := time.Now(); !polled && time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		_, err := g.Step(t.Context())
		polled = err == nil
	}
	if !polled {
		t.Fatal("the source did not poll again within 10s of the server coming back")
	}

	// And it still acts: a culprit holding a table its victims wait for.
	exec(t, clientOf(t, d), "CREATE TABLE gp_outage (id int PRIMARY KEY, v int); INSERT INTO gp_outage SELECT g, 0 FROM generate_series(1, 100) g")
	culprit := clientOf(t, d)
	cp := pid(t, culprit)
	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	exec(t, culprit, "BEGIN; LOCK TABLE gp_outage IN EXCLUSIVE MODE")
	c := background(actx, culprit, "SELECT pg_sleep(20)")
	v := background(actx, clientOf(t, d), "UPDATE gp_outage SET v = 1 WHERE id = 1")
	var acted []guard.Decision
	for start := time.Now(); len(acted) == 0 && time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		ds, err := g.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		acted = append(acted, ds...)
	}
	if len(acted) != 1 || acted[0].Outcome != guard.OutcomeActed || acted[0].Target.Session != cp {
		t.Fatalf("after the outage: decisions %+v, want one cancel of the culprit %d", acted, cp)
	}
	if err := <-c; err == nil || !strings.Contains(err.Error(), "canceling statement") {
		t.Fatalf("culprit's statement ended with %v, want a cancel", err)
	}
	exec(t, culprit, "ROLLBACK")
	if err := <-v; err != nil {
		t.Fatalf("victim: %v", err)
	}
}

// Command pathfence-static is the upstream U of moirai's pathfence bench
// suite under its "static" controller: U's one pool of workers behind a
// per-service adaptive concurrency limit, Vegas from go-concurrency-limits,
// at the library's defaults (static) or at a setting
// (static@ALPHA/BETA/SMOOTHING[/MAX], pathfencesuite.Vegas).
// It lives in the benchmark module because the library never imports
// its peers; `moirai bench run --suite pathfence` builds and runs it.
//
//	pathfence-static --config '{"role":"u","controller":"static",...}'
//
// It prints "listening ADDR" once it serves and stops when its standard
// input is closed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	gclcore "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gclfunctions "github.com/platinummonkey/go-concurrency-limits/limit/functions"
	gcllimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/moirai-go/moirai/bench/pathfencesuite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pathfence-static:", err)
		os.Exit(1)
	}
}

// vegas adapts go-concurrency-limits' limiter to the suite's Limiter.
type vegas struct{ l *gcllimiter.DefaultLimiter }

func (v vegas) Acquire(ctx context.Context) (func(ok bool), bool) {
	ln, ok := v.l.Acquire(ctx)
	if !ok || ln == nil {
		return nil, false
	}
	return func(ok bool) {
		if ok {
			ln.OnSuccess()
		} else {
			ln.OnIgnore()
		}
	}, true
}

// newVegas returns the library's Vegas limit at setting v, starting at and
// capped by maxLimit. The queue thresholds are the library's own form,
// multiples of log10 of the limit (functions.Log10RootFunction): at the
// library's defaults, 3 and 6, they are exactly its default alpha and
// beta, and its threshold, increase and decrease stay its defaults.
func newVegas(v pathfencesuite.Vegas, maxLimit int) *gcllimit.VegasLimit {
	log10 := gclfunctions.Log10RootFunction(0)
	alpha := func(limit int) int { return v.Alpha * log10(limit) }
	beta := func(limit int) int { return v.Beta * log10(limit) }
	return gcllimit.NewVegasLimitWithRegistry("pathfence-u", maxLimit, nil, maxLimit, v.Smoothing,
		alpha, beta, nil, nil, nil, -1, gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
}

func run() error {
	config := flag.String("config", "", "the server's configuration, as JSON")
	flag.Parse()
	var c pathfencesuite.ServerConfig
	if err := json.Unmarshal([]byte(*config), &c); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	v, ok := pathfencesuite.StaticVegas(c.Controller)
	if !ok || c.Pool < 1 {
		return fmt.Errorf("--config: want the static controller's U (static or static@ALPHA/BETA/SMOOTHING[/MAX]) with a pool, have controller %q and pool %d", c.Controller, c.Pool)
	}
	// The limit starts at the pool's size and may not exceed it (nor the
	// setting's maximum): Vegas lowers it when the requests' round trips
	// grow past the no-load round trip it has seen.
	maxLimit := c.Pool
	if v.Max > 0 {
		maxLimit = min(v.Max, c.Pool)
	}
	limit := newVegas(v, maxLimit)
	l, err := gcllimiter.NewDefaultLimiter(limit, int64(100*time.Millisecond), int64(time.Second), int64(100*time.Microsecond), 50,
		gclstrategy.NewSimpleStrategy(c.Pool), gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return pathfencesuite.Serve(ctx, c, func(addr string) { fmt.Printf("listening %s\n", addr) }, pathfencesuite.WithLimiter(vegas{l}))
}

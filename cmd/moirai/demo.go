package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/debugpage"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench/demo"
)

// demoFlags are demo's flags: the demo's configuration and what to serve
// and write beside it.
type demoFlags struct {
	cfg               demo.Config
	page              bool
	report, chartPath string
}

func newDemoCommand(g *globalFlags) *cobra.Command {
	df := &demoFlags{cfg: demo.Config{
		Duration: demo.DefaultDuration,
		Seed:     demo.DefaultSeed,
		Rate:     demo.DefaultRate,
		Interval: demo.DefaultInterval,
	}}
	cfg := &df.cfg
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an embedded service with a monopolized table lock, without control and with moirai",
		Long: `demo starts an HTTP service on 127.0.0.1 whose requests are cancellable
moirai tasks. Light inserts arrive at --rate per second (Poisson, seeded by
--seed) and each takes the table lock "table:orders" for about a
millisecond. After a quarter of the run a culprit transaction holds the lock
for up to 1.5 s at a time, in batches, and the inserts queue behind it.

The scenario runs twice, --duration each, with the same seed: first without
control (moirai only traces), then with moirai's defaults, targeted
cancellation on an objective of --slo (p99 of the inserts). Every --interval
the demo prints what the runtime sees: who holds the lock, who waits for it
and for how long, and moirai's last decision. Without control the culprit
completes; with moirai it is cancelled through its context, its request
fails with 503 and the cause (a client would retry it with moirai.Retry).
After the second run the demo prints moirai's decisions with their reasons
(the lock's contention, the candidates, their scores and gains, why the
others were left out) and the two runs side by side. --only none|moirai runs
one of the two. With -o json it prints one JSON object per line instead.`,
		Example: "  moirai demo\n  moirai demo --duration 5s --rate 100 --slo 20ms\n  moirai demo --only moirai -o json --duration 3s",
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, g, df) },
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the load of each run lasts (at least 2s)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the arrival process")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "insert requests per second (open loop)")
	f.DurationVar(&cfg.Interval, "interval", cfg.Interval, "time between live refreshes")
	f.DurationVar(&cfg.SLO, "slo", demo.DefaultSLO, "the inserts' latency objective (p99) in the run with moirai")
	f.StringVar(&cfg.Only, "only", "", "run only one of the two runs: none or moirai")
	f.BoolVar(&df.page, "page", true, "serve moirai's live page /debug/moirai on 127.0.0.1 while the demo runs")
	f.StringVar(&df.chartPath, "chart", "", "also write the report's latency chart alone, as an SVG file (docs/demo.svg is made so)")
	f.StringVar(&df.report, "report", filepath.Join(os.TempDir(), "moirai-demo.html"), "write the HTML report (both runs side by side, latency over time, decisions) to this file; \"\" for none")
	return cmd
}

// runDemo is demo: it runs the demo the flags describe, serving the live
// page while it runs if asked, then writes the chart and the report.
func runDemo(cmd *cobra.Command, g *globalFlags, df *demoFlags) error {
	cfg, page, report, chartPath := df.cfg, df.page, df.report, df.chartPath
	cfg.Out = cmd.OutOrStdout()
	if g.Output == outputJSON {
		cfg.Format = demo.JSON
	} else {
		cfg.Format = demo.Table
		cfg.Redraw = isTerminal(cfg.Out)
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	if page {
		stop, url, err := serveLivePage(&cfg)
		if err != nil {
			return err
		}
		defer stop()
		w := cfg.Out
		if cfg.Format == demo.JSON { // keep stdout one JSON object per line
			w = cmd.ErrOrStderr()
		}
		fmt.Fprintf(w, "live page: %s (follows the run in progress)\n", url)
	}
	sum, err := demo.Run(cmd.Context(), cfg)
	if errors.Is(err, demo.ErrInvalidConfig) {
		return usageError{err}
	}
	if err == nil && chartPath != "" {
		if cerr := writeDemoFile(chartPath, func(w io.Writer) error { return demo.WriteChart(w, cfg, sum) }); cerr != nil {
			return cerr
		}
	}
	if err == nil && report != "" {
		if rerr := writeDemoReport(report, cfg, sum); rerr != nil {
			return rerr
		}
		w := cfg.Out
		if cfg.Format == demo.JSON {
			w = cmd.ErrOrStderr()
		}
		fmt.Fprintf(w, "report: %s\n", report)
	}
	return err
}

// writeDemoReport writes the demo's HTML report to path.
func writeDemoReport(path string, cfg demo.Config, sum demo.Summary) error {
	return writeDemoFile(path, func(w io.Writer) error { return demo.WriteReport(w, cfg, sum) })
}

// writeDemoFile creates path and writes it with write.
func writeDemoFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("demo: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("demo: %s: %w", path, err)
	}
	return nil
}

// serveLivePage serves /debug/moirai for the run in progress on a loopback
// port and hooks cfg so that each run's controller replaces the last.
func serveLivePage(cfg *demo.Config) (stop func(), url string, err error) {
	var cur atomic.Pointer[moirai.Controller]
	cfg.OnController = func(_ string, ctl *moirai.Controller) { cur.Store(ctl) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("demo: live page: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/moirai", func(w http.ResponseWriter, r *http.Request) {
		ctl := cur.Load()
		if ctl == nil {
			http.Error(w, "the demo has not started a run yet; reload in a second", http.StatusServiceUnavailable)
			return
		}
		debugpage.Handler(ctl, debugpage.Config{Refresh: time.Second}).ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, "http://" + ln.Addr().String() + "/debug/moirai", nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/guard"
)

// runGuard runs `moirai guard` as a service: the flags from the config
// file at configPath overridden by the command line, metrics with health
// and readiness endpoints, SIGHUP to reload the config file (a bad one is
// refused, the config in force kept), SIGINT or SIGTERM to stop after the
// poll in progress, the audit file flushed.
func runGuard(cmd *cobra.Command, g *globalFlags, configPath string) error {
	errOut := cmd.ErrOrStderr()
	f, err := loadGuardFlags(cmd.Flags(), configPath)
	if err != nil {
		return usageError{err}
	}
	opt, err := f.options(errOut)
	if err != nil {
		return err
	}
	var files []*appendFile
	defer func() {
		for _, af := range files {
			if err := af.Close(); err != nil {
				fmt.Fprintf(errOut, "moirai guard: closing %s: %v\n", af.path, err)
			}
		}
	}()
	for _, o := range []struct {
		path, flag string
		to         *io.Writer
	}{{f.audit, "--audit", &opt.Audit}, {f.record, "--record", &opt.Record}} {
		if o.path == "" {
			continue
		}
		af, err := openAppend(o.path)
		if err != nil {
			return fmt.Errorf("%s: %w", o.flag, err)
		}
		files = append(files, af)
		*o.to = af
	}
	ctx := cmd.Context()
	hs := &healthServer{}
	if f.metricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opt.Registerer = reg
		stop, err := hs.serve(f.metricsAddr, reg, errOut)
		if err != nil {
			return err
		}
		defer stop()
	}
	gd, closeSrc, err := f.openGuard(ctx, errOut, opt)
	if err != nil {
		return err
	}
	defer closeSrc()
	hs.set(gd, f.interval)
	if f.once {
		fmt.Fprintf(errOut, "moirai guard: %s, %s\n", modeOf(gd.Options()), scopeOf(gd))
		ds, err := twoSteps(ctx, gd, f.interval)
		if err != nil {
			return escapedError(err)
		}
		return printDecisions(cmd.OutOrStdout(), g, ds)
	}
	eff := gd.Options()
	fmt.Fprintf(errOut, "moirai guard: polling every %v, every %v while a session waits (%s, %s%s); stop with Ctrl-C, reload with SIGHUP\n",
		eff.Interval, eff.AlertInterval, modeOf(eff), scopeOf(gd), leaseOf(gd))
	return serveGuard(ctx, cmd, gd, f, configPath, files)
}

// serveGuard runs gd until a stop signal (ctx's end: SIGINT or SIGTERM),
// reloading on SIGHUP.
func serveGuard(ctx context.Context, cmd *cobra.Command, gd *guard.Guard, f *guardFlags, configPath string, files []*appendFile) error {
	errOut := cmd.ErrOrStderr()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// The run's context outlives the stop signal by --shutdown-timeout:
	// the poll in progress and its actions finish, then Run returns.
	rctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	done := make(chan error, 1)
	go func() { done <- gd.Run(rctx) }()
	for {
		select {
		case err := <-done:
			return finishGuard(gd, errOut, err)
		case <-hup:
			reloadGuard(cmd, gd, f, configPath, files)
		case <-ctx.Done():
			fmt.Fprintln(errOut, "moirai guard: stopping after the poll in progress")
			gd.Stop()
			t := time.AfterFunc(f.shutdown, abort)
			err := <-done
			t.Stop()
			return finishGuard(gd, errOut, err)
		}
	}
}

// finishGuard gives the lease up, so that a standby takes over at once.
func finishGuard(gd *guard.Guard, errOut io.Writer, err error) error {
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = gd.Release(rctx)
	if err == nil || errors.Is(err, context.Canceled) {
		fmt.Fprintf(errOut, "moirai guard: stopped after %d decisions\n", len(gd.Decisions()))
		return nil // a requested stop is a clean one
	}
	return escapedError(err)
}

// reloadGuard reads the config file again and applies it, or says why not
// and keeps the config in force. The audit and record files are reopened
// (after a rotation), never dropped.
func reloadGuard(cmd *cobra.Command, gd *guard.Guard, f *guardFlags, configPath string, files []*appendFile) {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	for _, af := range files {
		if err := af.Reopen(); err != nil {
			log.Warn("moirai guard: reopening a file failed: writing on to the open one", "path", af.path, "err", err)
		}
	}
	refuse := func(err error) {
		gd.RefuseReload(err)
		log.Warn("moirai guard: reload refused: the config in force is kept", "err", guard.Escape(err.Error()))
	}
	nf, err := loadGuardFlags(cmd.Flags(), configPath)
	if err != nil {
		refuse(err)
		return
	}
	if changed := changedStartOnly(f.fs, nf.fs); len(changed) > 0 {
		refuse(fmt.Errorf("%v cannot change while the guard runs: restart it", changed))
		return
	}
	opt, err := nf.options(cmd.ErrOrStderr())
	if err != nil {
		refuse(err)
		return
	}
	if err := gd.Reload(opt); err != nil {
		log.Warn("moirai guard: reload refused: the config in force is kept", "err", guard.Escape(err.Error()))
		return
	}
	*f = *nf
	log.Info("moirai guard: config reloaded", "config", configPath)
}

// leaseOf says which lease the guard takes.
func leaseOf(gd *guard.Guard) string {
	if st := gd.Status(); st.Lease != "" {
		return fmt.Sprintf("; acting only while holding the lease %q", guard.Escape(st.Lease))
	}
	return ""
}

// escapedError is err with its message escaped: a server's message may
// carry control characters.
func escapedError(err error) error {
	if err == nil {
		return nil
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	return errors.New(guard.Escape(err.Error()))
}

// healthServer serves /metrics, /healthz and /readyz.
type healthServer struct {
	mu       sync.Mutex
	gd       *guard.Guard
	interval time.Duration
}

func (h *healthServer) set(gd *guard.Guard, interval time.Duration) {
	h.mu.Lock()
	h.gd, h.interval = gd, interval
	h.mu.Unlock()
}

// serve listens on addr; stop shuts the server down.
func (h *healthServer) serve(addr string, reg *prometheus.Registry, errOut io.Writer) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", h.health)
	mux.HandleFunc("/readyz", h.ready)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	fmt.Fprintf(errOut, "moirai guard: metrics on http://%s/metrics, health on /healthz and /readyz\n", lis.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// health answers 200 while the guard runs (its role in the body: active,
// standby, dry-run or solo), 503 before it starts.
func (h *healthServer) health(w http.ResponseWriter, _ *http.Request) {
	st, ok := h.status()
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	writeStatus(w, code, st)
}

// ready answers 200 when the last poll succeeded recently (within five
// intervals and 2 s): the guard sees the server and can act or take
// over; 503 otherwise.
func (h *healthServer) ready(w http.ResponseWriter, _ *http.Request) {
	st, ok := h.status()
	h.mu.Lock()
	iv := h.interval
	h.mu.Unlock()
	code := http.StatusOK
	if !ok || st.LastPoll.IsZero() || st.LastError != "" || time.Since(st.LastPoll) > 5*iv+2*time.Second {
		code = http.StatusServiceUnavailable
	}
	writeStatus(w, code, st)
}

func (h *healthServer) status() (guard.Status, bool) {
	h.mu.Lock()
	gd := h.gd
	h.mu.Unlock()
	if gd == nil {
		return guard.Status{Role: "starting"}, false
	}
	return gd.Status(), true
}

func writeStatus(w http.ResponseWriter, code int, st guard.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Moirai-Guard-Role", st.Role)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// appendFile is a file opened for appending that SIGHUP reopens (after
// logrotate moved it): writes go to the old file until the new one is
// open, none is lost.
type appendFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openAppend(path string) (*appendFile, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	return &appendFile{path: path, f: f}, nil
}

func (a *appendFile) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Write(p)
}

// Reopen opens the path again and swaps it in.
func (a *appendFile) Reopen() error {
	nf, err := os.OpenFile(a.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.f
	a.f = nf
	a.mu.Unlock()
	_ = old.Sync()
	return old.Close()
}

// Close flushes the file to disk and closes it.
func (a *appendFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	serr := a.f.Sync()
	if err := a.f.Close(); err != nil {
		return err
	}
	return serr
}

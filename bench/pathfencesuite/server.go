package pathfencesuite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench/internal/grpcserve"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/grpcmw"
)

// Roles of the suite's server processes.
const (
	RoleD = "d" // a downstream service
	RoleU = "u" // the shared upstream service
)

// Method names: the downstream's work and its stall control; the
// upstream's three kinds of request.
const (
	methodWork   = "/moirai.bench.pathfence.D/Work"
	methodStall  = "/moirai.bench.pathfence.D/Stall"
	methodPath1  = "/moirai.bench.pathfence.U/Path1"
	methodPath2  = "/moirai.bench.pathfence.U/Path2"
	methodLocal  = "/moirai.bench.pathfence.U/Local"
	methodFence  = "/moirai.bench.pathfence.U/Fence"
	pathAffected = "d1" // the fence path names of the downstreams
	pathOther    = "d2"
)

// ServerConfig is one server process's configuration; the suite passes it
// as JSON to the hidden `moirai bench serve-pathfence` command (and to the
// benchmark module's upstream for the static controller).
type ServerConfig struct {
	Role       string `json:"role"`
	Controller string `json:"controller,omitempty"` // U: how its workers are shared
	Listen     string `json:"listen,omitempty"`     // default 127.0.0.1:0
	// D: Workers slots, each call holding one for Service.
	Workers int           `json:"workers,omitempty"`
	Service time.Duration `json:"service,omitempty"`
	// U: its worker pool, the downstreams' addresses, the time of a local
	// request, the line bound (of the one line, or of each reservation's
	// under a fence), and the per-path permits the fenced controllers
	// start from.
	Pool    int           `json:"pool,omitempty"`
	D1      string        `json:"d1,omitempty"`
	D2      string        `json:"d2,omitempty"`
	Local   time.Duration `json:"local,omitempty"`
	Backlog int           `json:"backlog,omitempty"`
	Permits int           `json:"permits,omitempty"`
}

func (c *ServerConfig) check() error {
	switch c.Role {
	case RoleD:
		if c.Workers < 1 || c.Service <= 0 {
			return fmt.Errorf("pathfence suite: D needs workers ≥ 1 and a service time > 0, have %d and %v", c.Workers, c.Service)
		}
	case RoleU:
		if _, err := parseController(c.Controller); err != nil {
			return err
		}
		if c.Pool < 3 || c.D1 == "" || c.D2 == "" || c.Backlog < 1 {
			return fmt.Errorf("pathfence suite: U needs a pool of at least 3, both downstreams and a backlog ≥ 1; have %d, %q, %q, %d", c.Pool, c.D1, c.D2, c.Backlog)
		}
		if 2*c.Permits >= c.Pool || c.Permits < 1 {
			return fmt.Errorf("pathfence suite: %d permits per path do not fit a pool of %d with a local reservation", c.Permits, c.Pool)
		}
	default:
		return fmt.Errorf("pathfence suite: role %q, want %q or %q", c.Role, RoleD, RoleU)
	}
	return nil
}

// Limiter is a per-service concurrency limit in front of U's pool (the
// static controller's). Acquire returns at once: ok false rejects the
// call; otherwise done is called with whether the call succeeded.
type Limiter interface {
	Acquire(ctx context.Context) (done func(ok bool), ok bool)
}

// A ServeOption configures Serve.
type ServeOption func(*serveConfig)

type serveConfig struct{ limiter Limiter }

// WithLimiter puts l in front of U's pool; the static controller needs
// one (the benchmark module provides it, from go-concurrency-limits).
func WithLimiter(l Limiter) ServeOption { return func(c *serveConfig) { c.limiter = l } }

// Serve runs one server of the suite until ctx is done, calling ready with
// the address it listens on once it accepts calls.
func Serve(ctx context.Context, cfg ServerConfig, ready func(addr string), opts ...ServeOption) error {
	if err := cfg.check(); err != nil {
		return err
	}
	var sc serveConfig
	for _, o := range opts {
		o(&sc)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	var (
		srv     *grpc.Server
		cleanup = func() {}
	)
	switch cfg.Role {
	case RoleD:
		srv = serverD(cfg)
	case RoleU:
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		var err error
		srv, cleanup, err = serverU(ctx, ctl, cfg, sc.limiter)
		if err != nil {
			return err
		}
	}
	defer cleanup()
	return grpcserve.Serve(ctx, srv, cfg.Listen, ready)
}

// serverD is a downstream of fixed capacity: Workers slots of Service
// each. A stall freezes it: no call starts or answers until the stall is
// over, as in a garbage-collection pause or a log flush.
func serverD(cfg ServerConfig) *grpc.Server {
	slots := make(chan struct{}, cfg.Workers)
	var stallUntil atomic.Int64 // unix nanoseconds
	waitStall := func(ctx context.Context) error {
		for {
			d := time.Until(time.Unix(0, stallUntil.Load()))
			if d <= 0 {
				return nil
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "moirai.bench.pathfence.D",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Work", Handler: unary(methodWork, func(ctx context.Context, _ int64) (int64, error) {
				if err := waitStall(ctx); err != nil {
					return 0, err
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return 0, status.FromContextError(ctx.Err()).Err()
				}
				defer func() { <-slots }()
				t := time.NewTimer(cfg.Service)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return 0, status.FromContextError(ctx.Err()).Err()
				}
				return 1, waitStall(ctx)
			})},
			{MethodName: "Stall", Handler: unary(methodStall, func(_ context.Context, ms int64) (int64, error) {
				if ms <= 0 || ms > 60_000 {
					return 0, status.Errorf(codes.InvalidArgument, "stall of %d ms", ms)
				}
				until := time.Now().Add(time.Duration(ms) * time.Millisecond).UnixNano()
				for {
					cur := stallUntil.Load()
					if cur >= until || stallUntil.CompareAndSwap(cur, until) {
						return ms, nil
					}
				}
			})},
		},
	}, nil)
	return srv
}

// serverU is the shared upstream: Path1 calls D1, Path2 calls D2, Local
// calls nothing; its workers are shared as the controller says.
func serverU(ctx context.Context, ctl *moirai.Controller, cfg ServerConfig, lim Limiter) (*grpc.Server, func(), error) {
	kind, err := parseController(cfg.Controller)
	if err != nil {
		return nil, nil, err
	}
	names := map[string]string{cfg.D1: pathAffected, cfg.D2: pathOther}
	client := grpcmw.UnaryClientInterceptor(grpcmw.WithPathName(func(target, _ string) string {
		if n, ok := names[target]; ok {
			return n
		}
		return target
	}))
	dial := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(client))
	}
	cc1, err := dial(cfg.D1)
	if err != nil {
		return nil, nil, err
	}
	cc2, err := dial(cfg.D2)
	if err != nil {
		cc1.Close()
		return nil, nil, err
	}
	tctx, stopTuner := context.WithCancel(ctx)
	cleanup := func() { stopTuner(); cc1.Close(); cc2.Close() }

	var opts []grpcmw.Option
	var icpts []grpc.UnaryServerInterceptor
	var f *fence.Fence
	switch kind.name {
	case "shared", "static", "limit":
		opts = append(opts, grpcmw.WithQueue(ctl.Queue("u-workers", int64(cfg.Pool), int64(cfg.Backlog))))
		if kind.name == "limit" {
			icpts = append(icpts, limiterInterceptor(newFixedLimit(kind.permits)))
		}
		if kind.name == "static" {
			if lim == nil {
				cleanup()
				return nil, nil, errors.New("pathfence suite: the static controller needs a limiter (run it through the benchmark module, bench/peers)")
			}
			icpts = append(icpts, limiterInterceptor(lim))
		}
	default: // the fenced controllers
		permits := cfg.Permits
		if kind.permits > 0 {
			permits = kind.permits
		}
		f, err = fence.New(cfg.Pool, []fence.Reservation{{Name: pathAffected, Permits: permits}, {Name: pathOther, Permits: permits}},
			fence.WithBacklog(cfg.Backlog))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		if kind.name == "pathfence-sct" {
			go fence.NewTuner(f).Run(tctx)
		}
		opts = append(opts, grpcmw.WithFence(fence.NewClassifier(f)))
	}
	icpts = append(icpts, grpcmw.UnaryServerInterceptor(ctl, opts...))
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(icpts...))
	call := func(cc *grpc.ClientConn) func(ctx context.Context, _ int64) (int64, error) {
		return func(ctx context.Context, _ int64) (int64, error) {
			err := cc.Invoke(ctx, methodWork, wrapperspb.Int64(0), new(wrapperspb.Int64Value))
			return 1, err
		}
	}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "moirai.bench.pathfence.U",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Path1", Handler: unary(methodPath1, call(cc1))},
			{MethodName: "Path2", Handler: unary(methodPath2, call(cc2))},
			{MethodName: "Fence", Handler: unary(methodFence, func(context.Context, int64) (int64, error) {
				// The reservations now, packed: local, d1 and d2 permits
				// in three decimal fields (0 without a fence).
				if f == nil {
					return 0, nil
				}
				return packPermits(f.Local().Permits(), f.Path(pathAffected).Permits(), f.Path(pathOther).Permits()), nil
			})},
			{MethodName: "Local", Handler: unary(methodLocal, func(ctx context.Context, _ int64) (int64, error) {
				t := time.NewTimer(cfg.Local)
				defer t.Stop()
				select {
				case <-t.C:
					return 1, nil
				case <-ctx.Done():
					return 0, status.FromContextError(ctx.Err()).Err()
				}
			})},
		},
	}, nil)
	return srv, cleanup, nil
}

// limiterInterceptor rejects the calls l refuses and tells it how the
// others ended.
func limiterInterceptor(l Limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		done, ok := l.Acquire(ctx)
		if !ok {
			return nil, status.Error(codes.ResourceExhausted, "overloaded: concurrency limit")
		}
		resp, err := h(ctx, req)
		done(err == nil)
		return resp, err
	}
}

// unary is a method handler over Int64Value in and out, declared by hand
// so that the suite needs no generated code.
func unary(name string, fn func(ctx context.Context, in int64) (int64, error)) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.Int64Value)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			out, err := fn(ctx, req.(*wrapperspb.Int64Value).GetValue())
			if err != nil {
				return nil, err
			}
			return wrapperspb.Int64(out), nil
		}
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: name}, h)
	}
}

// controllerKind is a parsed controller name: fixed-K carries its
// permits, static@… its Vegas setting.
type controllerKind struct {
	name    string
	permits int
	vegas   Vegas
}

func parseController(name string) (controllerKind, error) {
	switch name {
	case "shared", "static", "pathfence", "pathfence-sct":
		return controllerKind{name: name}, nil
	}
	if setting, ok := strings.CutPrefix(name, "static@"); ok {
		v, err := ParseVegas(setting)
		if err != nil {
			return controllerKind{}, fmt.Errorf("pathfence suite: controller %q: %w", name, err)
		}
		return controllerKind{name: "static", vegas: v}, nil
	}
	for _, prefix := range []string{"fixed", "limit"} {
		if k, ok := strings.CutPrefix(name, prefix+"-"); ok {
			n, err := strconv.Atoi(k)
			if err == nil && n >= 1 && n <= 1000 {
				return controllerKind{name: prefix, permits: n}, nil
			}
		}
	}
	return controllerKind{}, fmt.Errorf("pathfence suite: unknown controller %q (want shared, static, static@ALPHA/BETA/SMOOTHING, pathfence, pathfence-sct, fixed-K or limit-N)", name)
}

// Vegas is the setting of the static controller's Vegas limit
// (go-concurrency-limits' limit.VegasLimit), static@ALPHA/BETA/SMOOTHING
// or static@ALPHA/BETA/SMOOTHING/MAX. Vegas estimates the requests queued
// in the service as limit × (1 − no-load RTT / RTT) and grows the limit
// while that estimate is below Alpha × log10(limit), shrinks it above
// Beta × log10(limit) (the library's defaults, 3 and 6); Smoothing
// weighs each new limit against the old one (1, the library's default,
// takes the new one whole); Max caps the limit (0: U's pool, where the
// limit also starts).
type Vegas struct {
	Alpha, Beta int
	Smoothing   float64
	Max         int
}

// DefaultVegas is go-concurrency-limits' Vegas at its defaults, the
// static controller's.
var DefaultVegas = Vegas{Alpha: 3, Beta: 6, Smoothing: 1}

// SweepVegas is the grid static@sweep expands to: Vegas's queue
// thresholds a third and twice the library's, and each of the three
// with a smoothing of 1, 0.5 and 0.2 (the library's defaults, static,
// left out).
var SweepVegas = func() []Vegas {
	var out []Vegas
	for _, ab := range [][2]int{{1, 2}, {3, 6}, {6, 12}} {
		for _, sm := range []float64{1, 0.5, 0.2} {
			if v := (Vegas{Alpha: ab[0], Beta: ab[1], Smoothing: sm}); v != DefaultVegas {
				out = append(out, v)
			}
		}
	}
	return out
}()

// String is the setting as static@ takes it.
func (v Vegas) String() string {
	s := fmt.Sprintf("%d/%d/%s", v.Alpha, v.Beta, strconv.FormatFloat(v.Smoothing, 'g', -1, 64))
	if v.Max > 0 {
		s += "/" + strconv.Itoa(v.Max)
	}
	return s
}

// ParseVegas parses a static controller's setting, ALPHA/BETA/SMOOTHING
// or ALPHA/BETA/SMOOTHING/MAX: integers 1 ≤ ALPHA < BETA ≤ 100, a
// smoothing in (0, 1], and a limit of 1 to 1,000.
func ParseVegas(s string) (Vegas, error) {
	bad := fmt.Errorf("setting %q: want ALPHA/BETA/SMOOTHING[/MAX] (e.g. static@3/6/0.5), integers 1 ≤ ALPHA < BETA ≤ 100, a smoothing in (0, 1] and a maximum limit of 1 to 1000", s)
	f := strings.Split(s, "/")
	if len(f) != 3 && len(f) != 4 {
		return Vegas{}, bad
	}
	var v Vegas
	var err [4]error
	v.Alpha, err[0] = strconv.Atoi(f[0])
	v.Beta, err[1] = strconv.Atoi(f[1])
	v.Smoothing, err[2] = strconv.ParseFloat(f[2], 64)
	if len(f) == 4 {
		v.Max, err[3] = strconv.Atoi(f[3])
		if err[3] == nil && (v.Max < 1 || v.Max > 1000) {
			return Vegas{}, bad
		}
	}
	if errors.Join(err[:]...) != nil || v.Alpha < 1 || v.Beta <= v.Alpha || v.Beta > 100 || !(v.Smoothing > 0) || v.Smoothing > 1 {
		return Vegas{}, bad
	}
	return v, nil
}

// StaticVegas returns the Vegas setting of a static controller's name:
// DefaultVegas for static, the parsed setting for static@…; ok is false
// for any other controller.
func StaticVegas(controller string) (v Vegas, ok bool) {
	k, err := parseController(controller)
	if err != nil || k.name != "static" {
		return Vegas{}, false
	}
	if k.vegas == (Vegas{}) {
		return DefaultVegas, true
	}
	return k.vegas, true
}

// fixedLimit is a static per-service concurrency limit (limit-N): at most
// n calls in U at once, the others rejected at arrival; the fixed
// counterpart of the static controller's Vegas limit.
type fixedLimit struct {
	n      int64
	inside atomic.Int64
}

func newFixedLimit(n int) *fixedLimit { return &fixedLimit{n: int64(n)} }

func (l *fixedLimit) Acquire(context.Context) (func(bool), bool) {
	if l.inside.Add(1) > l.n {
		l.inside.Add(-1)
		return nil, false
	}
	return func(bool) { l.inside.Add(-1) }, true
}

// packPermits packs three reservations' permits (each below 1,000) in one
// integer; unpackPermits undoes it.
func packPermits(local, d1, d2 int) int64 {
	return int64(local)*1_000_000 + int64(d1)*1_000 + int64(d2)
}

func unpackPermits(v int64) (local, d1, d2 int) {
	return int(v / 1_000_000), int(v / 1_000 % 1_000), int(v % 1_000)
}

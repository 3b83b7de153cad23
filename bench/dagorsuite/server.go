package dagorsuite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
	"github.com/moirai-go/moirai/bench/internal/grpcserve"
	"github.com/moirai-go/moirai/grpcmw"
)

// Roles of the suite's server processes.
const (
	RoleM = "m" // the service of fixed capacity
	RoleA = "a" // the entry service, calling M x times per task
)

// keyUser is the metadata key the load generator sends the user's ID in;
// A, the entry service, derives the user priority from it.
const keyUser = "moirai-bench-user"

// ServerConfig is one server process's configuration; the suite passes it
// as JSON to the hidden `moirai bench serve-dagor` command.
type ServerConfig struct {
	Role       string        `json:"role"`
	Controller string        `json:"controller"`
	Listen     string        `json:"listen,omitempty"`     // default 127.0.0.1:0
	Downstream string        `json:"downstream,omitempty"` // A: M's address
	Workers    int           `json:"workers"`              // M: worker slots
	Service    time.Duration `json:"service"`              // M: time per call
	Backlog    int           `json:"backlog,omitempty"`    // M under sre: bounded line
	// Window and WindowCount scale DAGOR's detection window (and Random's)
	// to the suite's rates; Threshold is its queueing-time threshold,
	// which CoDel's target also takes.
	Window      time.Duration `json:"window"`
	WindowCount int           `json:"window_count"`
	Threshold   time.Duration `json:"threshold"`
	SREWindow   time.Duration `json:"sre_window,omitempty"`
	SREK        float64       `json:"sre_k,omitempty"` // sre's K (zero: 2)
	// CoDelTarget and CoDelInterval are codel's and codel-rfc's setting
	// (zero: their defaults, 5 ms and 100 ms).
	CoDelTarget   time.Duration `json:"codel_target,omitempty"`
	CoDelInterval time.Duration `json:"codel_interval,omitempty"`
	Key           uint64        `json:"key"`      // A: the user hasher's key
	Deadline      time.Duration `json:"deadline"` // A: each task's deadline
}

func (c *ServerConfig) check() error {
	if c.Role != RoleM && c.Role != RoleA {
		return fmt.Errorf("dagor suite: role %q, want %q or %q", c.Role, RoleM, RoleA)
	}
	if _, ok := controllerByName(c.Controller); !ok {
		return fmt.Errorf("dagor suite: unknown controller %q", c.Controller)
	}
	if c.SREK != 0 && !(c.SREK >= 1 && c.SREK <= 100) {
		return fmt.Errorf("dagor suite: sre's K %g: want 0 (the default) or a number in [1, 100]", c.SREK)
	}
	if c.CoDelTarget < 0 || c.CoDelInterval < 0 {
		return fmt.Errorf("dagor suite: CoDel target %v and interval %v: want durations ≥ 0", c.CoDelTarget, c.CoDelInterval)
	}
	if c.Role == RoleM && (c.Workers < 1 || c.Service <= 0) {
		return fmt.Errorf("dagor suite: M needs workers ≥ 1 and a service time > 0, have %d and %v", c.Workers, c.Service)
	}
	if c.Role == RoleA && c.Downstream == "" {
		return errors.New("dagor suite: A needs the downstream address of M")
	}
	return nil
}

// Serve runs one server of the suite until ctx is done, calling ready with
// the address it listens on once it accepts calls.
func Serve(ctx context.Context, cfg ServerConfig, ready func(addr string)) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	var (
		srv  *grpc.Server
		desc *grpc.ServiceDesc
	)
	switch cfg.Role {
	case RoleM:
		srv, desc = serverM(ctl, cfg)
	case RoleA:
		var closeA func()
		var err error
		srv, desc, closeA, err = serverA(ctl, cfg)
		if err != nil {
			return err
		}
		defer closeA()
	}
	srv.RegisterService(desc, nil)
	return grpcserve.Serve(ctx, srv, cfg.Listen, ready)
}

// serverM is the service of fixed capacity: Workers slots, each call
// holding one for Service, behind the controller's admission.
func serverM(ctl *moirai.Controller, cfg ServerConfig) (*grpc.Server, *grpc.ServiceDesc) {
	if cfg.Controller == "codel" {
		return serverMCoDel(cfg)
	}
	backlog := int64(0)
	if cfg.Controller == "sre" {
		backlog = int64(max(cfg.Backlog, 1))
	}
	q := ctl.Queue("m-workers", int64(cfg.Workers), backlog)
	opts := []grpcmw.Option{grpcmw.WithQueue(q), grpcmw.WithTrustedPeer(func(context.Context) bool { return true })}
	switch cfg.Controller {
	case "random":
		opts = append(opts, grpcmw.WithAdmitter(baseline.NewRandom(cfg.Window, cfg.WindowCount, cfg.Threshold)))
	case "codel-rfc":
		opts = append(opts, grpcmw.WithAdmitter(baseline.NewCoDel(baseline.WithCoDelTarget(cfg.CoDelTarget), baseline.WithCoDelInterval(cfg.CoDelInterval))))
	case "dagor", "dagor-local":
		opts = append(opts, grpcmw.WithAdmission(admit.NewDAGOR(admit.WithWindow(cfg.Window, cfg.WindowCount), admit.WithThreshold(cfg.Threshold))))
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, opts...)))
	return srv, workDesc(work(cfg))
}

// work is M's handler: it holds its worker slot for the service time.
func work(cfg ServerConfig) workFunc {
	return func(ctx context.Context, _ string) error {
		t := time.NewTimer(cfg.Service)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// serverMCoDel is M under CoDel as RPC servers run it ("Fail at
// Scale"): its worker slots behind an adaptive-LIFO queue, switched to LIFO
// while baseline.RPCCoDel says overloaded, each call queueing no longer
// than the timeout RPCCoDel gives it at arrival. As a worker thread does,
// the queue asks RPCCoDel at the dequeue, when it hands a call a freed
// slot, whether the call queued too long, and rejects it there and hands
// the slot on if it did: the time the call's goroutine then takes to run
// is not counted as queueing (on a loaded machine it is often longer than
// the 5 ms target, and a check made by the call itself once running
// rejected nearly every call handed a slot). It runs without the moirai
// middleware, as a server using that CoDel would.
func serverMCoDel(cfg ServerConfig) (*grpc.Server, *grpc.ServiceDesc) {
	codel := baseline.NewRPCCoDel(baseline.WithRPCCoDelTarget(cfg.CoDelTarget), baseline.WithRPCCoDelInterval(cfg.CoDelInterval))
	epoch := time.Now()
	clock := func() time.Duration { return time.Since(epoch) }
	q := baseline.NewLIFOQueue(cfg.Workers, func() bool { return codel.Overloaded(clock()) },
		baseline.WithDequeueCheck(clock, codel.Started))
	rejected := status.Error(codes.ResourceExhausted, "overloaded: call rejected by CoDel")
	icpt := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		arrived := clock()
		codel.Admit(arrived)
		qctx, cancel := context.WithTimeout(ctx, codel.Timeout(arrived))
		err := q.Enter(qctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return nil, rejected
		}
		defer q.Release()
		return h(ctx, req)
	}
	return grpc.NewServer(grpc.UnaryInterceptor(icpt)), workDesc(work(cfg))
}

// serverA is the entry service: it assigns each task its priority (one
// business priority, the user priority from the user's ID) and calls M x
// times in sequence, stopping at the first failure.
func serverA(ctl *moirai.Controller, cfg ServerConfig) (*grpc.Server, *grpc.ServiceDesc, func(), error) {
	hasher := admit.NewUserHasher(cfg.Key, time.Hour)
	prio := func(ctx context.Context, _ string) moirai.Priority {
		user := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(keyUser); len(v) == 1 {
				user = v[0]
			}
		}
		return moirai.Priority{Business: 1, User: hasher.User(user, time.Now())}
	}
	var copts []grpc.DialOption
	switch cfg.Controller {
	case "dagor":
		copts = append(copts, grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
	case "dagor-local":
		copts = append(copts, grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(grpcmw.WithoutLocalShedding())))
	}
	cc, err := grpc.NewClient(cfg.Downstream, append(copts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return nil, nil, nil, err
	}
	var sre *baseline.SRE
	if cfg.Controller == "sre" {
		k := cfg.SREK
		if k == 0 {
			k = baseline.DefaultSREK
		}
		sre = baseline.NewSRE(k, cfg.SREWindow)
	}
	start := time.Now()
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithPriority(prio))))
	desc := taskDesc(func(ctx context.Context, calls int64) (int64, error) {
		if cfg.Deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.Deadline)
			defer cancel()
		}
		var done int64
		for i := range calls {
			if sre != nil && !sre.Allow(time.Since(start)) {
				return done, status.Error(codes.ResourceExhausted, "throttled by the client")
			}
			err := cc.Invoke(ctx, methodWork, wrapperspb.String(strconv.FormatInt(i, 10)), new(wrapperspb.BoolValue))
			if sre != nil {
				sre.Record(time.Since(start), status.Code(err) != codes.ResourceExhausted)
			}
			if err != nil {
				return done, err
			}
			done++
		}
		return done, nil
	})
	return srv, desc, func() { cc.Close() }, nil
}

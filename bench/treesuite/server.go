package treesuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench/internal/grpcserve"
	"github.com/moirai-go/moirai/grpcmw"
)

// Roles of the suite's three processes.
const (
	RoleFront = "front" // the entry service: light trees call b1, culprit trees b1 and b2
	RoleB1    = "b1"    // the backend whose table lock the culprit monopolizes
	RoleB2    = "b2"    // the backend only the culprit tree calls
)

// ServerConfig is one process's configuration.
type ServerConfig struct {
	Role       string
	Controller string // none, local or tree
	Listen     string // host:port; "" picks a loopback port
	B1, B2     string // front's downstreams
	// SLO is the light trees' objective, the controllers' target.
	SLO time.Duration
	// LightWork is how long a light call holds b1's table lock;
	// CulpritWork how long a culprit call works in b1 (holding the lock)
	// and in b2 (holding a worker) when nothing cancels it.
	LightWork, CulpritWork time.Duration
	// Retries is how many times front retries a call that failed with
	// Unavailable, after RetryBackoff: its ordinary retry policy.
	Retries      int
	RetryBackoff time.Duration
}

func (c ServerConfig) check() error {
	switch c.Role {
	case RoleFront:
		if c.B1 == "" || c.B2 == "" {
			return errors.New("treesuite: front needs b1's and b2's addresses")
		}
	case RoleB1, RoleB2:
	default:
		return fmt.Errorf("treesuite: unknown role %q (want front, b1 or b2)", c.Role)
	}
	if !slicesContains(controllerNames, c.Controller) {
		return fmt.Errorf("treesuite: unknown controller %q (want %s)", c.Controller, strings.Join(controllerNames, ", "))
	}
	if c.SLO <= 0 || c.LightWork <= 0 || c.CulpritWork <= 0 || c.Retries < 0 || c.RetryBackoff < 0 {
		return fmt.Errorf("treesuite: slo %v, light work %v, culprit work %v, retries %d, backoff %v: want positive times", c.SLO, c.LightWork, c.CulpritWork, c.Retries, c.RetryBackoff)
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Stats is what a process reports after a run: every hold of its
// resource by a culprit tree, when its controller first acted on each
// culprit tree, its retries of culprit calls into b1, and the light calls
// cancelled.
type Stats struct {
	Holds    []Hold           `json:"holds"`
	Decided  map[string]int64 `json:"decided"` // culprit tree → Unix ns of the first cancellation here
	Retries  int64            `json:"retries_into_b1"`
	Victims  int64            `json:"victims_cancelled"`
	Culprits int64            `json:"culprit_calls_cancelled"`
}

// Hold is one hold of a process's resource by a culprit tree, in Unix ns.
type Hold struct {
	Tree       string `json:"tree"`
	Start, End int64
}

type recorder struct {
	mu      sync.Mutex
	st      Stats
	retries atomic.Int64
	victims atomic.Int64
	culprit atomic.Int64
}

func (r *recorder) hold(tree string, start time.Time) {
	end := time.Now()
	r.mu.Lock()
	r.st.Holds = append(r.st.Holds, Hold{tree, start.UnixNano(), end.UnixNano()})
	r.mu.Unlock()
}

func (r *recorder) decided(tree string) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	if _, ok := r.st.Decided[tree]; !ok {
		r.st.Decided[tree] = now
	}
	r.mu.Unlock()
}

func (r *recorder) stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Holds = append([]Hold(nil), st.Holds...)
	st.Decided = make(map[string]int64, len(r.st.Decided))
	for k, v := range r.st.Decided {
		st.Decided[k] = v
	}
	st.Retries, st.Victims, st.Culprits = r.retries.Load(), r.victims.Load(), r.culprit.Load()
	return st
}

// options are the controller's options of a process.
func options(cfg ServerConfig) []moirai.Option {
	tick := moirai.WithTick(10*time.Millisecond, 5*time.Millisecond)
	if cfg.Controller == "none" {
		return []moirai.Option{tick, moirai.WithoutMechanisms()}
	}
	return []moirai.Option{tick, moirai.WithSLO(0.99, cfg.SLO), moirai.WithPenalties(false)}
}

// Serve runs one process of the suite until ctx is done, calling ready
// with its address once it serves.
func Serve(ctx context.Context, cfg ServerConfig, ready func(addr string)) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	ctl := moirai.New(options(cfg)...)
	defer ctl.Close()
	rec := &recorder{st: Stats{Decided: map[string]int64{}}}
	tree := cfg.Controller == "tree"
	sopts := []grpcmw.Option{grpcmw.WithTrustedPeer(func(context.Context) bool { return true })}
	if tree {
		sopts = append(sopts, grpcmw.WithTree(cfg.Role))
	}
	var call callFunc
	switch cfg.Role {
	case RoleFront:
		q := ctl.Queue("front-workers", 256, 0)
		sopts = append(sopts, grpcmw.WithQueue(q))
		var copts []grpcmw.ClientOption
		if tree {
			copts = append(copts, grpcmw.WithTreeCancelPeer(ctl, func(grpcmw.Peer) bool { return true }))
		}
		dial := func(addr string) (*grpc.ClientConn, error) {
			return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(append(copts, grpcmw.WithoutLocalShedding())...)))
		}
		b1, err := dial(cfg.B1)
		if err != nil {
			return err
		}
		defer b1.Close()
		b2, err := dial(cfg.B2)
		if err != nil {
			return err
		}
		defer b2.Close()
		call = front(cfg, rec, b1, b2)
	case RoleB1:
		call = backend(cfg, rec, ctl.Mutex("b1-table"), nil)
	case RoleB2:
		call = backend(cfg, rec, nil, ctl.Semaphore("b2-workers", 4))
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, sopts...)))
	srv.RegisterService(serviceDesc(call, func() ([]byte, error) { return json.Marshal(rec.stats()) }), nil)
	return grpcserve.Serve(ctx, srv, cfg.Listen, ready)
}

// noteCancel records, on the task in ctx, when its controller cancels it:
// the decision time of a culprit call, or a victim.
func noteCancel(ctx context.Context, rec *recorder, req string) func() bool {
	t := moirai.From(ctx)
	treeID, culprit := strings.CutPrefix(req, "culprit:")
	return t.OnCancel(func() {
		if culprit {
			rec.decided(treeID)
			rec.culprit.Add(1)
		} else {
			rec.victims.Add(1)
		}
	})
}

// front serves a tree: a light tree calls b1 once; a culprit tree calls
// b1 and b2 at once, and holds its worker until both answer.
func front(cfg ServerConfig, rec *recorder, b1, b2 *grpc.ClientConn) callFunc {
	return func(ctx context.Context, req string) error {
		stop := noteCancel(ctx, rec, req)
		defer stop()
		treeID, culprit := strings.CutPrefix(req, "culprit:")
		if !culprit {
			return invoke(ctx, cfg, rec, b1, req, false)
		}
		start := time.Now()
		defer rec.hold(treeID, start)
		errs := make(chan error, 2)
		go func() { errs <- invoke(ctx, cfg, rec, b1, req, true) }()
		go func() { errs <- invoke(ctx, cfg, rec, b2, req, false) }()
		return errors.Join(<-errs, <-errs)
	}
}

// invoke calls a backend under front's ordinary retry policy: a call that
// fails with Unavailable is sent again after the backoff, Retries times,
// unless the caller's own context has ended (as it has once the tree is
// cancelled).
func invoke(ctx context.Context, cfg ServerConfig, rec *recorder, cc *grpc.ClientConn, req string, countRetries bool) error {
	for attempt := 0; ; attempt++ {
		err := cc.Invoke(ctx, methodOf(req), wrapperspb.String(req), new(wrapperspb.BoolValue))
		if err == nil || status.Code(err) != codes.Unavailable || attempt == cfg.Retries || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(cfg.RetryBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if countRetries && strings.HasPrefix(req, "culprit:") {
			rec.retries.Add(1)
		}
	}
}

// backend serves a call: b1's calls take its table lock, b2's a worker;
// a light call holds it for LightWork, a culprit call for CulpritWork in
// 5 ms steps, reporting progress and stopping when cancelled.
func backend(cfg ServerConfig, rec *recorder, lock *moirai.Mutex, workers *moirai.Semaphore) callFunc {
	return func(ctx context.Context, req string) error {
		stop := noteCancel(ctx, rec, req)
		defer stop()
		treeID, culprit := strings.CutPrefix(req, "culprit:")
		if lock != nil {
			if err := lock.Lock(ctx); err != nil {
				return status.FromContextError(err).Err()
			}
			defer lock.Unlock()
		} else {
			p, err := workers.Acquire(ctx, 1)
			if err != nil {
				return status.FromContextError(err).Err()
			}
			defer p.Release()
		}
		if !culprit {
			time.Sleep(cfg.LightWork)
			return nil
		}
		start := time.Now()
		defer rec.hold(treeID, start)
		const step = 5 * time.Millisecond
		total := int64(cfg.CulpritWork / step)
		t := moirai.From(ctx)
		for i := range total {
			t.Progress(i, total)
			select {
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-time.After(step):
			}
		}
		return nil
	}
}

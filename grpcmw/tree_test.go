package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/tree"
)

// A plan is a request tree written as a string, which each service reads
// from the request it gets (the health check's service name) and serves:
//
//	o        a leaf that succeeds
//	c        a leaf whose task its controller cancels as a culprit
//	r        a victim leaf: rejected by admission (ResourceExhausted)
//	f        a leaf that forges a culprit answer for another tree
//	s<i>(…)  a call to service i, whose handler calls each child in turn
//	         (one at a time, so that the order of events is the plan's)
//
// The root is always a call: "s0(s1(c) s2(o))".

// mesh is a set of services, each with its own controller, serving plans
// and calling each other through the tree interceptors.
type mesh struct {
	ctls    []*moirai.Controller
	clients []healthpb.HealthClient
	// root records, per request number, the cause of the root task's
	// context when its handler returned.
	mu   sync.Mutex
	root map[int]error
	// trust says whether a service trusts the answers of another.
	trust func(from, to int) bool
}

type node struct {
	healthpb.UnimplementedHealthServer
	m   *mesh
	svc int
}

func (n *node) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	num, plan, _ := strings.Cut(r.GetService(), ":")
	err := n.serve(ctx, plan)
	if num != "" {
		i, _ := strconv.Atoi(num)
		n.m.mu.Lock()
		n.m.root[i] = context.Cause(ctx)
		n.m.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{}, nil
}

func (n *node) serve(ctx context.Context, content string) error {
	var first error
	for _, item := range items(content) {
		var err error
		switch item {
		case "o":
		case "c":
			t := moirai.From(ctx)
			if err := n.m.ctls[n.svc].Cancel(t.ID(), fmt.Sprintf("holds what others wait for at s%d", n.svc)); err != nil {
				return err
			}
			<-ctx.Done()
			err = context.Cause(ctx)
		case "r":
			err = status.Error(codes.ResourceExhausted, "overloaded: call rejected by admission control")
		case "f":
			forged := tree.Answer(tree.New("/other"), "liar", "forged", 0)
			st, _ := status.New(codes.Unavailable, "forged").WithDetails(&errdetails.ErrorInfo{
				Reason: grpcmw.ReasonCulprit, Domain: "moirai", Metadata: map[string]string{"culprit": forged.Format()}})
			err = st.Err()
		default:
			i, sub := int(item[1]-'0'), item[3:len(item)-1]
			_, err = n.m.clients[n.svc*len(n.m.ctls)+i].Check(ctx, &healthpb.HealthCheckRequest{Service: ":" + sub})
		}
		if err != nil && first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break // cancelled: the tree's other calls are not made
		}
	}
	return first
}

// items splits "o s1(a b) c" into its top-level items.
func items(content string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(content); i++ {
		if i == len(content) || content[i] == ' ' && depth == 0 {
			if i > start {
				out = append(out, content[start:i])
			}
			start = i + 1
			continue
		}
		switch content[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
	}
	return out
}

func newMesh(t *testing.T, n int, trust func(from, to int) bool) *mesh {
	m := &mesh{root: map[int]error{}, trust: trust}
	lis := make([]*bufconn.Listener, n)
	for i := range n {
		ctl := moirai.New(moirai.WithoutMechanisms())
		t.Cleanup(func() { ctl.Close() })
		m.ctls = append(m.ctls, ctl)
		lis[i] = bufconn.Listen(1 << 16)
		srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl,
			grpcmw.WithTree("s"+strconv.Itoa(i)),
			grpcmw.WithTrustedPeer(func(context.Context) bool { return true }))))
		healthpb.RegisterHealthServer(srv, &node{m: m, svc: i})
		go srv.Serve(lis[i])
		t.Cleanup(srv.Stop)
	}
	for from := range n {
		for to := range n {
			l := lis[to]
			cc, err := grpc.NewClient("passthrough:///s"+strconv.Itoa(to), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
				grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(grpcmw.WithTreeCancel(m.ctls[from],
					func(string) bool { return trust(from, to) }))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cc.Close() })
			m.clients = append(m.clients, healthpb.NewHealthClient(cc))
		}
	}
	return m
}

// call sends plan to service 0 as request num (from outside: its tree is
// new there) and returns the call's error and the root task's cause.
func (m *mesh) call(t *testing.T, num int, plan string) (error, error) {
	i, sub := int(plan[1]-'0'), plan[3:len(plan)-1]
	_, err := m.clients[i].Check(t.Context(), &healthpb.HealthCheckRequest{Service: strconv.Itoa(num) + ":" + sub})
	m.mu.Lock()
	defer m.mu.Unlock()
	return err, m.root[num]
}

func TestTreeCancelledFromTheHopThatDecided(t *testing.T) {
	m := newMesh(t, 3, func(int, int) bool { return true })
	// s0 calls s1, whose call to s2 is the culprit; s0's next call to s2
	// is never made, and s0's own task is cancelled naming s2.
	err, cause := m.call(t, 1, "s0(s1(s2(c)) s2(o))")
	cu, ok := tree.Of(cause)
	if !ok || !errors.Is(cause, moirai.ErrCancelled) || cu.Hop != "s2" || !strings.Contains(cu.Reason, "holds what others wait for at s2") {
		t.Fatalf("root's cause %v; want a culprit decided at s2", cause)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("root's answer %v, want Unavailable", err)
	}
	// Every hop's decision log names s2.
	for _, i := range []int{0, 1} {
		var found bool
		for _, r := range m.ctls[i].Decisions() {
			if r.Decision.Policy == "tree" && r.Outcome == policy.Acted && strings.Contains(r.Decision.Reason, "culprit at s2") {
				found = true
			}
		}
		if !found {
			t.Errorf("s%d's decisions %+v name no tree cancellation decided at s2", i, m.ctls[i].Decisions())
		}
	}
}

func TestTreeIgnoresForgedAndUntrusted(t *testing.T) {
	// s0 does not trust s1's answers.
	m := newMesh(t, 2, func(from, to int) bool { return !(from == 0 && to == 1) })
	before := grpcmw.ForgedCulprits()
	_, cause := m.call(t, 1, "s0(s1(c))")
	if cause != nil {
		t.Fatalf("an untrusted culprit answer cancelled the root: %v", cause)
	}
	if grpcmw.ForgedCulprits() != before+1 {
		t.Fatalf("forged culprits %d -> %d, want one more", before, grpcmw.ForgedCulprits())
	}
	before++
	// A trusted downstream whose answer names another tree, or is not
	// well formed: ignored and counted.
	ctl := m.ctls[0]
	icpt := grpcmw.UnaryClientInterceptor(grpcmw.WithTreeCancel(ctl, func(string) bool { return true }))
	cc, err := grpc.NewClient("passthrough:///rogue", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, tk := ctl.Begin(t.Context(), moirai.Spec{Cancellable: true, Tree: tree.New("/mine")})
	defer tk.End(nil)
	for i, answer := range []string{
		tree.Answer(tree.New("/other"), "liar", "forged", 0).Format(),
		"garbage",
		tree.Answer(tk.Spec().Tree, "liar", "forged", 0).Format() + "\x00",
	} {
		st, _ := status.New(codes.Unavailable, "forged").WithDetails(&errdetails.ErrorInfo{
			Reason: grpcmw.ReasonCulprit, Domain: "moirai", Metadata: map[string]string{"culprit": answer}})
		_ = icpt(ctx, "/m", nil, nil, cc, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return st.Err() })
		if tk.Cancelled() || grpcmw.ForgedCulprits() != before+1+int64(i) {
			t.Fatalf("answer %q: cancelled %v, forged %d -> %d", answer, tk.Cancelled(), before, grpcmw.ForgedCulprits())
		}
	}
	// The same answer for its own tree cancels it.
	st, _ := status.New(codes.Unavailable, "culprit").WithDetails(&errdetails.ErrorInfo{
		Reason: grpcmw.ReasonCulprit, Domain: "moirai", Metadata: map[string]string{"culprit": tree.Answer(tk.Spec().Tree, "b", "held", 0).Format()}})
	_ = icpt(ctx, "/m", nil, nil, cc, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return st.Err() })
	if cu, ok := tree.Of(context.Cause(ctx)); !ok || cu.Hop != "b" {
		t.Fatalf("a trusted culprit answer for its own tree: cause %v", context.Cause(ctx))
	}
}

// TestTreeGenerated serves random trees: a tree's root is cancelled
// exactly when one of its leaves that runs is a culprit, as a culprit
// decided at that leaf's hop when the leaf is below the root; trees whose
// sub-requests were only victims (rejected), forged answers or successes
// never are.
func TestTreeGenerated(t *testing.T) {
	const services = 3
	m := newMesh(t, services, func(int, int) bool { return true })
	for _, seed := range []uint64{32, 33, 34} {
		r := rand.New(rand.NewPCG(seed, seed))
		var culprits, victims int
		for num := 1; num <= 40; num++ {
			plan := fmt.Sprintf("s%d(%s)", r.IntN(services), genContent(r, services, 3))
			hop, depth, want := firstCulprit(plan)
			_, cause := m.call(t, int(seed)*1000+num, plan)
			cu, remote := tree.Of(cause)
			switch {
			case !want && cause != nil:
				t.Fatalf("seed %d tree %d %s: a tree without a culprit was cancelled: %v", seed, num, plan, cause)
			case want && !errors.Is(cause, moirai.ErrCancelled):
				t.Fatalf("seed %d tree %d %s: root not cancelled (cause %v), want a culprit at %s", seed, num, plan, cause, hop)
			case want && remote != (depth > 0):
				t.Fatalf("seed %d tree %d %s: root's cause %v, want the culprit at %s depth %d", seed, num, plan, cause, hop, depth)
			case remote && cu.Hop != hop:
				t.Fatalf("seed %d tree %d %s: culprit decided at %s, want %s", seed, num, plan, cu.Hop, hop)
			}
			if want {
				culprits++
			} else if strings.ContainsAny(plan, "rf") {
				victims++
			}
		}
		if culprits == 0 || victims == 0 {
			t.Fatalf("seed %d drew %d culprit trees and %d victim trees: the generator no longer covers both", seed, culprits, victims)
		}
	}
}

// genContent draws a handler's random content over n services: up to 3
// items, calls nested at most depth deep; leaves are culprits, victims,
// forgeries or successes.
func genContent(r *rand.Rand, n, depth int) string {
	k := 1 + r.IntN(3)
	parts := make([]string, k)
	for i := range parts {
		if depth == 0 || r.IntN(2) == 0 {
			parts[i] = string("ocrfoo"[r.IntN(6)])
		} else {
			parts[i] = fmt.Sprintf("s%d(%s)", r.IntN(n), genContent(r, n, depth-1))
		}
	}
	return strings.Join(parts, " ")
}

// firstCulprit returns the hop and depth of the first culprit leaf of
// plan to run (a handler stops at its first cancellation; a victim or a
// forged answer does not stop it), and whether there is one.
func firstCulprit(plan string) (string, int, bool) {
	var walk func(item string, depth int) (string, int, bool)
	walk = func(item string, depth int) (string, int, bool) {
		svc, content := item[:2], item[3:len(item)-1]
		for _, it := range items(content) {
			switch it {
			case "c":
				return svc, depth, true
			case "o", "r", "f":
			default:
				if hop, d, ok := walk(it, depth+1); ok {
					return hop, d, true
				}
			}
		}
		return "", 0, false
	}
	return walk(plan, 0)
}

// countCancel is a health service whose every call its controller cancels.
type countCancel struct {
	healthpb.UnimplementedHealthServer
	ctl   *moirai.Controller
	calls atomic.Int64
}

func (c *countCancel) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	c.calls.Add(1)
	if err := c.ctl.Cancel(moirai.From(ctx).ID(), "holds the lock"); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestCulpritNotRetriedByPolicy: gRPC's retry policy, which retries
// Unavailable, does not retry a culprit answer; it retries a call of no
// tree that the controller cancelled (an ordinary failure) of a method
// safe to run twice (WithReexecutable).
func TestCulpritNotRetriedByPolicy(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	svc := &countCancel{ctl: ctl}
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithTree("b"),
		grpcmw.WithTrustedPeer(func(context.Context) bool { return true }),
		grpcmw.WithReexecutable("/grpc.health.v1.Health/Check"))))
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(lis)
	defer srv.Stop()
	const policy = `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}], "retryPolicy": {
		"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1,
		"retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	caller := moirai.New(moirai.WithoutMechanisms())
	defer caller.Close()
	cc, err := grpc.NewClient("passthrough:///b", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithDefaultServiceConfig(policy),
		grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(grpcmw.WithTreeCancel(caller, func(string) bool { return true }))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := healthpb.NewHealthClient(cc)
	for _, tc := range []struct {
		tree  string
		calls int64
	}{{tree.New("/front"), 1}, {"", 3}} {
		svc.calls.Store(0)
		ctx, tk := caller.Begin(t.Context(), moirai.Spec{Cancellable: true, Tree: tc.tree})
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		tk.End(err)
		if status.Code(err) != codes.Unavailable || svc.calls.Load() != tc.calls {
			t.Errorf("tree %q: %v after %d attempts, want Unavailable after %d", tc.tree, err, svc.calls.Load(), tc.calls)
		}
	}
}

func (c *countCancel) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return func(ctx context.Context) error {
		c.calls.Add(1)
		if err := c.ctl.Cancel(moirai.From(ctx).ID(), "holds the lock"); err != nil {
			return err
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}(ss.Context())
}

// TestTreeStream: a stream whose task its controller cancels answers as a
// culprit, and the stream client interceptor cancels the caller's task.
func TestTreeStream(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	svc := &countCancel{ctl: ctl}
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.StreamInterceptor(grpcmw.StreamServerInterceptor(ctl, grpcmw.WithTree("b"),
		grpcmw.WithTrustedPeer(func(context.Context) bool { return true }))))
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(lis)
	defer srv.Stop()
	caller := moirai.New(moirai.WithoutMechanisms())
	defer caller.Close()
	cc, err := grpc.NewClient("passthrough:///b", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithStreamInterceptor(grpcmw.StreamClientInterceptor(grpcmw.WithTreeCancel(caller, func(string) bool { return true }))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, tk := caller.Begin(t.Context(), moirai.Spec{Cancellable: true, Tree: tree.New("/front")})
	defer tk.End(nil)
	st, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv: %v, want Unavailable", err)
	}
	if cu, ok := tree.Of(context.Cause(ctx)); !ok || cu.Hop != "b" {
		t.Fatalf("caller's cause %v, want a culprit at b", context.Cause(ctx))
	}
}

// TestTreeWithoutTrustCounted: a server interceptor with WithTree and no
// trusted peer says so (TreeStats), and a culprit answer its handler
// passes on from a downstream is stripped and counted.
func TestTreeWithoutTrustCounted(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	in := grpcmw.UnaryServerInterceptor(ctl, grpcmw.WithTree("front"))
	st, err := status.New(codes.Unavailable, "downstream").WithDetails(&errdetails.ErrorInfo{Reason: grpcmw.ReasonCulprit, Domain: "moirai",
		Metadata: map[string]string{"culprit": "1 /svc/M;5;evil;forged"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = in(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/M"}, func(context.Context, any) (any, error) {
		return nil, st.Err()
	})
	if len(status.Convert(err).Details()) != 0 {
		t.Errorf("the passed-on culprit answer went up: %v", status.Convert(err).Details())
	}
	if ts := ctl.TreeStats(); !ts.NoTrustedPeer || ts.IgnoredCulprits != 1 {
		t.Errorf("TreeStats %+v; want no trusted peer and one ignored culprit answer", ts)
	}
}

// TestCancelledCallRetriedOnlyWhenSafe: a cancelled call of a method not
// declared idempotent, whose class did not opt in, tells the client's
// retry policy not to retry it (pushback -1): the handler runs once. With
// WithReexecutable, it is retried.
func TestCancelledCallRetriedOnlyWhenSafe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []grpcmw.Option
		calls int64
	}{{"not opted in", nil, 1}, {"opted in", []grpcmw.Option{grpcmw.WithReexecutable()}, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := moirai.New(moirai.WithoutMechanisms())
			defer ctl.Close()
			svc := &countCancel{ctl: ctl}
			lis := bufconn.Listen(1 << 16)
			srv := grpc.NewServer(grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, tc.opts...)))
			healthpb.RegisterHealthServer(srv, svc)
			go srv.Serve(lis)
			defer srv.Stop()
			const policy = `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}], "retryPolicy": {
				"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1,
				"retryableStatusCodes": ["UNAVAILABLE"]}}]}`
			cc, err := grpc.NewClient("passthrough:///b", grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithDefaultServiceConfig(policy))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			_, err = healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if status.Code(err) != codes.Unavailable || svc.calls.Load() != tc.calls {
				t.Errorf("%v after %d attempts, want Unavailable after %d", err, svc.calls.Load(), tc.calls)
			}
		})
	}
}

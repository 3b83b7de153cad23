package grpcmw

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/tree"
)

// BenchmarkTreeCarry isolates what carrying the identity adds to a call,
// on incoming metadata that holds it: the server's read of the priority
// (baseline) or of the priority and the tree (moirai), and the client's
// preparation of a call of a task that serves no tree (baseline) or one
// (moirai). Besides ns/op, each reports cpu-ns/op: the CPU time of its
// thread per call, which a machine shared with other work disturbs far
// less than the wall clock.
func BenchmarkTreeCarry(b *testing.B) {
	id := tree.New("/front/Root")
	md := metadata.Pairs(KeyPriority, "3/4", tree.Key, id)
	ctx := metadata.NewIncomingContext(context.Background(), md)
	c := newConfig([]Option{WithTree("b"), WithTrustedPeer(func(context.Context) bool { return true })})
	b.Run("server/baseline", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			_ = c.priorityIn(ctx, "/m", c.isTrusted)
		}
	})
	b.Run("server/moirai", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			_ = c.priorityIn(ctx, "/m", c.isTrusted)
			if _, in := c.treeIn(ctx, "/m", c.isTrusted); !in {
				b.Fatal("not joined")
			}
		}
	})
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	cl := newClient([]ClientOption{WithoutLocalShedding()})
	for _, bc := range []struct{ name, tree string }{{"client/baseline", ""}, {"client/moirai", id}} {
		b.Run(bc.name, func(b *testing.B) {
			tctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "/front/Root", Tree: bc.tree})
			defer t.End(nil)
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := cl.prepare(tctx, "b"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cpuPerOp locks the benchmark to its thread and returns the function
// that reports the thread's CPU time per op, and allocations.
func cpuPerOp(b *testing.B) func() {
	b.ReportAllocs()
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		used := threadCPU() - start
		runtime.UnlockOSThread()
		if start > 0 && b.N > 0 {
			b.ReportMetric(float64(used)/float64(time.Duration(b.N)), "cpu-ns/op")
		}
	}
}

func TestPeerOf(t *testing.T) {
	for target, want := range map[string]Peer{
		"dns:///b1.internal:50051":    {Host: "b1.internal", Port: "50051"},
		"passthrough:///b":            {Host: "b"},
		"b1:443":                      {Host: "b1", Port: "443"},
		"dns://8.8.8.8/b1.internal:9": {Host: "b1.internal", Port: "9"},
		"[::1]:50051":                 {Host: "::1", Port: "50051"},
		"unix:///run/b.sock":          {Host: "/run/b.sock"},
		"unix:b.sock":                 {Host: "b.sock"},
	} {
		want.Target, want.Method = target, "/s/M"
		if got := peerOf(target, "/s/M"); got != want {
			t.Errorf("peerOf(%q) = %+v, want %+v", target, got, want)
		}
	}
}

package grpcmw_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/grpcmw"
	"github.com/moirai-go/moirai/tree"
)

// BenchmarkTreeServer is the server interceptor on a call from a trusted
// peer that carries a priority and a tree's identity: baseline ignores the
// identity, moirai joins the tree. The difference is what carrying the
// identity costs a server per call.
func BenchmarkTreeServer(b *testing.B) {
	id := tree.New("/front/Root")
	benchServer(b, metadata.Pairs(grpcmw.KeyPriority, "3/4", tree.Key, id), metadata.Pairs(grpcmw.KeyPriority, "3/4", tree.Key, id))
}

// BenchmarkTreeServerWire is BenchmarkTreeServer with baseline's caller
// not sending the identity at all: the difference adds gRPC's copy of one
// more incoming key (metadata.FromIncomingContext copies every key).
func BenchmarkTreeServerWire(b *testing.B) {
	benchServer(b, metadata.Pairs(grpcmw.KeyPriority, "3/4"), metadata.Pairs(grpcmw.KeyPriority, "3/4", tree.Key, tree.New("/front/Root")))
}

func benchServer(b *testing.B, plain, withTree metadata.MD) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	trusted := grpcmw.WithTrustedPeer(func(context.Context) bool { return true })
	handler := func(context.Context, any) (any, error) { return nil, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Method"}
	for _, bc := range []struct {
		name string
		opts []grpcmw.Option
		md   metadata.MD
	}{
		{"baseline", []grpcmw.Option{trusted}, plain},
		{"moirai", []grpcmw.Option{trusted, grpcmw.WithTree("b")}, withTree},
	} {
		b.Run(bc.name, func(b *testing.B) {
			icpt := grpcmw.UnaryServerInterceptor(ctl, bc.opts...)
			ctx := metadata.NewIncomingContext(context.Background(), bc.md)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := icpt(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTreeClient is the client interceptor on a call of a task:
// baseline's task serves no tree, moirai's serves one, whose identity goes
// out with the priority; the upward cancellation is ready but the call
// succeeds.
func BenchmarkTreeClient(b *testing.B) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	cc, err := grpc.NewClient("passthrough:///b", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, bc := range []struct {
		name string
		tree string
		opts []grpcmw.ClientOption
	}{
		{"baseline", "", nil},
		{"moirai", tree.New("/front/Root"), []grpcmw.ClientOption{grpcmw.WithTreeCancel(ctl, func(string) bool { return true })}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			icpt := grpcmw.UnaryClientInterceptor(bc.opts...)
			ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "/front/Root", Cancellable: true, Tree: bc.tree})
			defer t.End(nil)
			b.ReportAllocs()
			for b.Loop() {
				if err := icpt(ctx, "/pkg.Svc/Method", nil, nil, cc, invoker); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package grpcmw_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/grpcmw"
)

// A server's interceptors make every call a task, admit it by priority
// (DAGOR, learning the queueing time from a bounded worker pool) and tell
// callers the level.
func ExampleOption() {
	ctl := moirai.New()
	defer ctl.Close()
	opts := []grpcmw.Option{
		grpcmw.WithClass(func(method string) string { return method }),
		grpcmw.WithCancellable(true),
		grpcmw.WithAdmission(admit.NewDAGOR()),
		grpcmw.WithQueue(ctl.Queue("grpc:workers", 64, 256)),
		grpcmw.WithPriority(func(context.Context, string) moirai.Priority { return grpcmw.Lowest }),
		grpcmw.WithTrustedPeer(func(context.Context) bool { return false }), // never honour a caller's priority
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(ctl, opts...)),
		grpc.StreamInterceptor(grpcmw.StreamServerInterceptor(ctl, opts...)))
	defer srv.Stop()
	fmt.Println(grpcmw.KeyPriority, grpcmw.KeyLevel)
	// Output: moirai-priority moirai-level
}

// A client's interceptors send the priority of the task in the call's
// context, learn each target's level and shed locally what it would refuse.
func ExampleClientOption() {
	cc, err := grpc.NewClient("passthrough:///inventory:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(grpcmw.WithLevelTTL(time.Second))),
		grpc.WithStreamInterceptor(grpcmw.StreamClientInterceptor(grpcmw.WithoutLocalShedding())))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	fmt.Println(cc.Target())
	// Output: passthrough:///inventory:443
}

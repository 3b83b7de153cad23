// Package grpcserve runs the gRPC servers of moirai's multi-process bench
// suites.
package grpcserve

import (
	"context"
	"net"

	"google.golang.org/grpc"
)

// Serve listens on addr (host:port; port 0 picks one), serves srv until
// ctx is done, and calls ready with the address it listens on once it
// accepts calls. It returns nil when ctx ends the serving, and the error
// that stopped it otherwise.
func Serve(ctx context.Context, srv *grpc.Server, addr string, ready func(addr string)) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	ready(lis.Addr().String())
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		return nil
	case err := <-errc:
		return err
	}
}

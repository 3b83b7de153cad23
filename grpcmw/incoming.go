package grpcmw

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// A call's incoming metadata is read one key at a time. The metadata
// package's ValueFromIncomingContext compares the key with every key of
// the metadata, case folded, when it is absent, as the priority's and the
// tree's keys are on most calls: of the interceptor's own work on a call
// that carries neither, two fifths. A gRPC server hands its handlers
// metadata whose keys are lowercase (HTTP/2 field names are lowercase, and
// grpc-go's transport refuses the others; metadata.Pairs, New, Set and
// Append lowercase theirs), and every key the middleware reads is
// lowercase, so it looks the key up directly in the metadata the context
// carries. Only a metadata map built by hand with a key in another case
// holds a key this does not read.

// incomingKey is the context key under which package metadata keeps a
// call's incoming metadata (learnIncomingKey), or nil if it could not be
// learnt: the middleware then reads through ValueFromIncomingContext.
var incomingKey = learnIncomingKey()

// keyRecorder is a context that records the first key it is asked for,
// and holds no value.
type keyRecorder struct {
	context.Context
	key any
}

func (r *keyRecorder) Value(k any) any {
	if r.key == nil {
		r.key = k
	}
	return nil
}

// learnIncomingKey returns the key ValueFromIncomingContext asks a
// context for, asking it through a keyRecorder: nil unless the metadata
// NewIncomingContext attaches is then found under that key. The key's
// type is unexported; its value is what the context compares.
func learnIncomingKey() (key any) {
	defer func() {
		if recover() != nil {
			key = nil // a key of a type that cannot be compared
		}
	}()
	rec := &keyRecorder{Context: context.Background()}
	metadata.ValueFromIncomingContext(rec, KeyPriority)
	if rec.key == nil {
		return nil
	}
	md := metadata.Pairs(KeyPriority, "1/1")
	if got, ok := metadata.NewIncomingContext(context.Background(), md).Value(rec.key).(metadata.MD); !ok || len(got[KeyPriority]) != 1 {
		return nil
	}
	return rec.key
}

// incoming returns the values of key, lowercase, in the incoming
// metadata of ctx. They are the metadata's own, not a copy: read only.
func incoming(ctx context.Context, key string) []string {
	if incomingKey == nil {
		return metadata.ValueFromIncomingContext(ctx, key)
	}
	md, _ := ctx.Value(incomingKey).(metadata.MD)
	return md[key]
}

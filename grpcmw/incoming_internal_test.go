package grpcmw

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/moirai-go/moirai/tree"
)

// TestIncomingReadsWhatGRPCReads: the middleware's direct read of a key
// of a call's incoming metadata (incoming) finds what
// metadata.ValueFromIncomingContext finds, on generated metadata built as
// a gRPC server builds it (lowercase keys, one or more values, the keys
// present or absent, under layers of other values), and the key it reads
// by was learnt (without it, every read compares every key).
func TestIncomingReadsWhatGRPCReads(t *testing.T) {
	if incomingKey == nil {
		t.Fatal("the incoming metadata's context key was not learnt: every read falls back to ValueFromIncomingContext")
	}
	keys := []string{KeyPriority, KeyContinuation, tree.Key, ":authority", "content-type", "user-agent", "x-other"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var kv []string
		for _, k := range keys {
			for range rng.IntN(3) {
				kv = append(kv, k, fmt.Sprint(rng.IntN(100)))
			}
		}
		ctx := context.Background()
		if rng.IntN(4) > 0 {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
		}
		for range rng.IntN(3) {
			ctx = context.WithValue(ctx, struct{ n int }{rng.IntN(9)}, seed)
		}
		for _, k := range keys {
			if got, want := incoming(ctx, k), metadata.ValueFromIncomingContext(ctx, k); !slices.Equal(got, want) {
				t.Errorf("seed %d: %s: read %q, ValueFromIncomingContext %q", seed, k, got, want)
			}
		}
	}
}

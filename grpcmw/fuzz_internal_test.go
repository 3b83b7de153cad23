package grpcmw

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/tree"
)

// FuzzPriorityMetadata: whatever a caller puts in the priority metadata, an
// untrusted caller runs at the priority the server assigns, and a trusted
// one at a priority in range that the value really spells (one value,
// parsed), else at the assigned one.
func FuzzPriorityMetadata(f *testing.F) {
	for _, s := range []string{"0/0", "63/127", "64/0", "1/2", "", "/", "7/3,1/1", "\x00", "-1/-1", "01/02"} {
		f.Add(s, "", true)
		f.Add(s, "5/5", false)
	}
	f.Fuzz(func(t *testing.T, v, second string, trusted bool) {
		assigned := moirai.Priority{Business: 9, User: 9}
		c := newConfig([]Option{
			WithPriority(func(context.Context, string) moirai.Priority { return assigned }),
			WithTrustedPeer(func(context.Context) bool { return trusted }),
		})
		md := metadata.Pairs(KeyPriority, v)
		if second != "" {
			md.Append(KeyPriority, second)
		}
		got := c.priorityOf(metadata.NewIncomingContext(context.Background(), md), "/m")
		if int(got.Business) >= admit.BusinessLevels || int(got.User) >= admit.UserLevels {
			t.Fatalf("priority %v out of range from %q", got, v)
		}
		want := assigned
		if p, ok := admit.ParsePriority(v); ok && trusted && second == "" {
			want = p
		}
		if got != want {
			t.Fatalf("metadata %q (then %q), trusted %v: ran at %v, want %v", v, second, trusted, got, want)
		}
	})
}

// FuzzLevelMetadata: a level a downstream answers with is learned only when
// it is one well-formed value, and what is learned is what it spells.
func FuzzLevelMetadata(f *testing.F) {
	for _, s := range []string{"0/0", "63/127", "64/0", "10/20", "", "x", "1/2\n", "-3/4"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		c := newClient(nil)
		md := metadata.Pairs(KeyLevel, v)
		if twice {
			md.Append(KeyLevel, v)
		}
		c.learn("t", md)
		got, learned := c.levels.Get("t")
		want, ok := admit.ParseLevel(v)
		if learned != (ok && !twice) {
			t.Fatalf("level %q (twice %v): learned %v, parses %v", v, twice, learned, ok)
		}
		if learned && got != want {
			t.Fatalf("level %q learned as %v, want %v", v, got, want)
		}
	})
}

// FuzzTreeMetadata: whatever a caller puts in the tree metadata, the call
// joins that tree only when the caller is trusted and the value is one
// well-formed identity; otherwise it is the root of a new tree.
func FuzzTreeMetadata(f *testing.F) {
	for _, s := range []string{"abc.1 /m", "abc.1 ", "ABC /m", "", " ", "a;b c", "a\x00 m"} {
		f.Add(s, "", true)
		f.Add(s, "abc.2 /n", true)
		f.Add(s, "", false)
	}
	f.Fuzz(func(t *testing.T, v, second string, trusted bool) {
		c := newConfig([]Option{WithTree("hop"), WithTrustedPeer(func(context.Context) bool { return trusted })})
		md := metadata.Pairs(tree.Key, v)
		if second != "" {
			md.Append(tree.Key, second)
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		got, in := c.treeIn(ctx, "/m", c.isTrusted)
		want := trusted && second == "" && tree.Parse(v)
		if in != want || (in && got != v) {
			t.Fatalf("tree %q (then %q), trusted %v: joined %q (%v), want joined %v", v, second, trusted, got, in, want)
		}
		if !in && (!tree.Parse(got) || got == v) {
			t.Fatalf("tree %q refused, but the new tree %q is not a fresh identity", v, got)
		}
	})
}

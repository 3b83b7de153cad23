package tree_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/moirai-go/moirai/tree"
)

// A culprit answer as a backend sends it and a caller reads it back; the
// caller's retry loop waits its Wait before sending the call again.
func ExampleCulprit() {
	id := "k3x.7 /shop.Front/Checkout" // as tree.New made it at the root
	answer := tree.Answer(id, "inventory", "holds table:stock for 3s while 12 wait", 1500*time.Millisecond)
	header := answer.Format()
	fmt.Println(header)

	got, ok := tree.ParseCulprit(header)
	fmt.Println(ok, got.Hop, got.Wait)

	err := fmt.Errorf("checkout: %w", got)
	if cu, ok := tree.Of(err); ok {
		fmt.Println("do not retry before", cu.Wait, errors.Is(err, tree.ErrCulprit))
	}
	// Output:
	// k3x.7 /shop.Front/Checkout;1500;inventory;holds table:stock for 3s while 12 wait
	// true inventory 1.5s
	// do not retry before 1.5s true
}

func ExampleSplit() {
	id, class := tree.Split("k3x.7 GET /orders/{id}")
	fmt.Println(id, "|", class, "|", tree.Parse("k3x.7 GET /orders/{id}"))
	// Output: k3x.7 | GET /orders/{id} | true
}

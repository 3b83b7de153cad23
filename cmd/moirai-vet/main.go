// Command moirai-vet runs moirai's analyzers, which find the resources of
// a Go program worth instrumenting with moirai: shared locks, hand-made
// wait loops, semaphores and worker pools, caches and buffer pools, and
// request loops a cancellation cannot stop. See docs/VET.md.
//
// Usage, standalone or as a vet tool:
//
//	moirai-vet ./...
//	go vet -vettool=$(which moirai-vet) ./...
//
// It reports and never rewrites code, but with -fix, which applies the
// suggested fixes (only the mechanical ones are offered).
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/moirai-go/moirai/analysis/vet"
)

func main() { multichecker.Main(vet.Analyzers()...) }

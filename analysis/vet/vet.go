package vet

import (
	"golang.org/x/tools/go/analysis"

	"github.com/moirai-go/moirai/analysis/cache"
	"github.com/moirai-go/moirai/analysis/semaphore"
	"github.com/moirai-go/moirai/analysis/sharedlock"
	"github.com/moirai-go/moirai/analysis/uncancellable"
	"github.com/moirai-go/moirai/analysis/waitloop"
)

// Analyzers returns moirai's analyzers, in the order they are documented.
func Analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		sharedlock.Analyzer,
		waitloop.Analyzer,
		semaphore.Analyzer,
		cache.Analyzer,
		uncancellable.Analyzer,
	}
}

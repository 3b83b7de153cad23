// Package vet is moirai's static analysis as a whole: the list of
// analyzers that find the resources of a Go program worth instrumenting
// with moirai, and a driver that runs them over packages, for `moirai
// vet` (cmd/moirai) and tests. cmd/moirai-vet runs the same analyzers
// as a multichecker, usable as a vet tool.
//
// # Goals
//
// pBox's authors spent a week finding MySQL's resources by hand and then
// wrote an analyzer (an LLVM pass) that found 81 % of the state events
// they had placed. moirai's analyzers do the same for Go, on the
// golang.org/x/tools/go/analysis framework, so that they run under go
// vet, in editors and in CI. Each finding names the resource, why it was
// flagged, and the moirai primitive to use:
//
//   - sharedlock: shared sync.Mutex and sync.RWMutex locks held across
//     slow work on request paths (moirai Mutex, RWMutex);
//   - waitloop: hand-made waits, loops that wait until shared state
//     changes (a raw resource's WaitBegin/WaitEnd);
//   - semaphore: buffered channels used as counting semaphores, x/sync
//     semaphores, worker pools (Semaphore, Queue);
//   - cache: LRU caches, library and hand-made (Memory);
//   - uncancellable: request loops and sleeps that ignore their context,
//     where a cancellation would not take effect.
//
// They share the blocking analysis (which functions wait, do I/O or
// lock; exported as facts, so wrappers are known across packages) and
// the request-path and storage classification of analysis/internal/scan.
// Each package's documentation states its heuristic and its known false
// positives and negatives; docs/VET.md has the measured recall and
// precision.
//
// # Non-goals
//
// No whole-program call graph, no alias or escape analysis, no data-flow
// beyond a function: every heuristic is local to a package and errs
// toward reporting less. Nothing is rewritten unless fixes are applied
// explicitly (-fix), and only mechanical rewrites are offered as fixes.
//
// # Bad input
//
// A package that does not load or type-check is reported as an error and
// not analysed; the other packages are. Generated files (with the
// standard "// Code generated ... DO NOT EDIT." header) and test files
// are never reported on.
package vet

import (
	"github.com/moirai-go/moirai/analysis/cache"
	"github.com/moirai-go/moirai/analysis/semaphore"
	"github.com/moirai-go/moirai/analysis/sharedlock"
	"github.com/moirai-go/moirai/analysis/uncancellable"
	"github.com/moirai-go/moirai/analysis/waitloop"

	"golang.org/x/tools/go/analysis"
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

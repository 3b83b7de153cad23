package guard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Opener opens a source from a DSN.
type Opener func(ctx context.Context, dsn string) (Source, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Opener{}
)

// Register makes a source available for DSNs of the URL scheme (e.g.
// "postgres"). Source packages call it from init; a second registration
// of a scheme replaces the first.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[strings.ToLower(scheme)] = open
}

// Open opens the source for dsn, chosen by its scheme ("postgres://…",
// "mysql://…"). The source packages must be linked in (imported).
func Open(ctx context.Context, dsn string) (Source, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	registryMu.Lock()
	open := registry[strings.ToLower(scheme)]
	var known []string
	for k := range registry {
		known = append(known, k+"://")
	}
	registryMu.Unlock()
	slices.Sort(known)
	if !ok || open == nil {
		return nil, fmt.Errorf("guard: DSN must start with one of %s", strings.Join(known, ", "))
	}
	return open(ctx, dsn)
}

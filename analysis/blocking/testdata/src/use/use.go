package use

import (
	"context"

	"dep"
)

// Twice waits through the imported wrapper: the fact crosses packages.
func Twice(ctx context.Context) { // want Twice:`blocking\(must=wait may=wait: a select\)`
	dep.Wrapper(ctx)
	dep.Wrapper(ctx)
}

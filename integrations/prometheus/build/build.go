// Package build builds the Prometheus integration's load program,
// cmd/promload, twice: on Prometheus's released module, and on a copy of
// that module's source with prometheus.patch applied (see package
// serverbuild, which builds the etcd integration's too).
package build

import (
	"context"

	"github.com/moirai-go/moirai/integrations/serverbuild"
)

// ServerModule is the module the patch applies to.
const ServerModule = "github.com/prometheus/prometheus"

// PatchFile is the patch's name in the integration's directory.
const PatchFile = "prometheus.patch"

// Binaries are the two builds of cmd/promload.
type Binaries = serverbuild.Binaries

// Build builds cmd/promload of the integration module in dir into out,
// released and patched; out also receives the patched source (out/server)
// and the build's go.mod (out/patched.mod). out must be empty or absent.
func Build(ctx context.Context, dir, out string) (Binaries, error) {
	return serverbuild.Build(ctx, serverbuild.Spec{ServerModule: ServerModule, PatchFile: PatchFile, Load: "promload"}, dir, out)
}

// Count returns the lines a unified diff adds and removes.
func Count(patch []byte) (added, removed int) { return serverbuild.Count(patch) }

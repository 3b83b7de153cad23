// Package build builds the etcd integration's load program, cmd/etcdload,
// twice: on etcd's released server module, and on a copy of that module's
// source with etcd.patch applied (see package serverbuild, which builds the
// Prometheus integration's too).
package build

import (
	"context"

	"github.com/moirai-go/moirai/integrations/serverbuild"
)

// ServerModule is the module the patch applies to.
const ServerModule = "go.etcd.io/etcd/server/v3"

// PatchFile is the patch's name in the integration's directory.
const PatchFile = "etcd.patch"

// Binaries are the two builds of cmd/etcdload.
type Binaries = serverbuild.Binaries

// Build builds cmd/etcdload of the integration module in dir into out,
// released and patched; out also receives the patched source (out/server)
// and the build's go.mod (out/patched.mod). out must be empty or absent.
func Build(ctx context.Context, dir, out string) (Binaries, error) {
	return serverbuild.Build(ctx, serverbuild.Spec{ServerModule: ServerModule, PatchFile: PatchFile, Load: "etcdload"}, dir, out)
}

// Count returns the lines a unified diff adds and removes.
func Count(patch []byte) (added, removed int) { return serverbuild.Count(patch) }

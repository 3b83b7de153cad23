package otelmoirai

import "runtime/debug"

// ScopeName is the instrumentation scope of the spans, metrics and log
// records this package emits: its import path, as OpenTelemetry's
// instrumentation libraries name theirs.
const ScopeName = "github.com/moirai-go/moirai/otelmoirai"

// Version returns the version of this module the binary was built with,
// the instrumentation scope's version: the module version the go
// command recorded, or "devel" when it recorded none (a build inside
// this repository, or through a replace directive).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path != ScopeName {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			return m.Replace.Version
		}
		if m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "devel"
}

// Command prombuild builds cmd/promload on Prometheus's released module and on
// its source patched with prometheus.patch (see package build), and prints the
// binaries' paths as JSON.
//
//	cd integrations/prometheus && GOWORK=off go run ./cmd/prombuild -out /tmp/prombuild
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/moirai-go/moirai/integrations/prometheus/build"
)

func main() {
	dir := flag.String("dir", ".", "the integration module's directory")
	out := flag.String("out", "", "directory for the builds (empty or absent)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: prombuild [-dir DIR] -out DIR")
		os.Exit(2)
	}
	b, err := build.Build(context.Background(), *dir, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "prombuild:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(b); err != nil {
		fmt.Fprintln(os.Stderr, "prombuild:", err)
		os.Exit(1)
	}
}

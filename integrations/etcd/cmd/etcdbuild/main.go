// Command etcdbuild builds cmd/etcdload on etcd's released server and on
// its source patched with etcd.patch (see package build), and prints the
// binaries' paths as JSON.
//
//	cd integrations/etcd && GOWORK=off go run ./cmd/etcdbuild -out /tmp/etcdbuild
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/moirai-go/moirai/integrations/etcd/build"
)

func main() {
	dir := flag.String("dir", ".", "the integration module's directory")
	out := flag.String("out", "", "directory for the builds (empty or absent)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: etcdbuild [-dir DIR] -out DIR")
		os.Exit(2)
	}
	b, err := build.Build(context.Background(), *dir, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbuild:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(b); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbuild:", err)
		os.Exit(1)
	}
}

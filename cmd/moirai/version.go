package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// versionInfo is what `moirai version` prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func newVersionCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of moirai, of Go, and the platform",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion(debug.ReadBuildInfo)
			out := cmd.OutOrStdout()
			if g.Output == outputJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "moirai\t%s\n", v.Version)
			if v.Commit != "" {
				fmt.Fprintf(tw, "commit\t%s\n", v.Commit)
			}
			fmt.Fprintf(tw, "go\t%s\n", v.Go)
			fmt.Fprintf(tw, "platform\t%s/%s\n", v.OS, v.Arch)
			return tw.Flush()
		},
	}
}

// buildVersion reads the module's version from the build information:
// "devel" when it is unknown (a build from a work tree, or a test).
func buildVersion(read func() (*debug.BuildInfo, bool)) versionInfo {
	v := versionInfo{Version: "devel", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	bi, ok := read()
	if !ok {
		return v
	}
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v.Version = mv
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v.Commit = s.Value
		}
	}
	return v
}

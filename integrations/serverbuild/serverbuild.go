// Package serverbuild builds an integration's load program twice: on its
// server's released module, and on a copy of that module's source with the
// integration's patch applied. The integration modules of a patched server
// (integrations/etcd, integrations/prometheus) share it through a replace
// directive: it needs nothing but the standard library, so it adds nothing
// to the graph of versions each of them pins for its server. It also
// holds the part of the load programs' output they share ([Result]),
// which the bench module's serversuite reads: one definition of that
// format for its writers and its reader.
//
// The released source comes from the Go module cache (go mod download
// fills it from the module proxy if needed). The copy is made in a
// directory of the caller's, patched with patch(1) (git apply if patch is
// missing), and the patched binary is built with -modfile: a copy of the
// integration module's go.mod that replaces the server's module with the
// copy. No server source is kept in the repository, and the integration
// module's go.mod is never changed.
package serverbuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Spec is what an integration builds.
type Spec struct {
	// ServerModule is the module the patch applies to.
	ServerModule string
	// PatchFile is the patch's name in the integration's directory.
	PatchFile string
	// Load is the load program's name: the integration module's
	// cmd/Load, built into Load-released and Load-patched.
	Load string
}

// Result is the part of a load program's line of output (one JSON object
// a run) that every integration shares and package serversuite reads:
// the victims' outcome and latencies, the culprit's fate, the work lost.
// A load program's own result embeds it, beside what only that server
// has.
type Result struct {
	Run            string  `json:"run"`
	Patched        bool    `json:"patched"`
	Victims        int     `json:"victims"`
	VictimsOK      int     `json:"victims_ok"`
	VictimsFailed  int     `json:"victims_failed"`
	VictimsCancel  int     `json:"victims_cancelled"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	MeanMs         float64 `json:"mean_ms"`
	Throughput     float64 `json:"throughput"`
	SLOAttainment  float64 `json:"slo_attainment"`
	CulpritSent    int     `json:"culprit_sent"`
	CulpritOK      int     `json:"culprit_ok"`
	CulpritCancel  int     `json:"culprit_cancelled"`
	CulpritTimeout int     `json:"culprit_timed_out"`
	CulpritFailed  int     `json:"culprit_failed"`
	CulpritLimited int     `json:"culprit_held_back"`
	CulpritMeanMs  float64 `json:"culprit_mean_ms"`
	// WorkLost is the server time, in seconds, of the culprit's requests
	// whose answer nobody got or used: cancelled, timed out, refused past
	// a limit.
	WorkLost   float64 `json:"work_lost"`
	Cancelled  int64   `json:"controller_cancellations"`
	FirstError string  `json:"first_error,omitempty"`
	// LatenciesMs are the latencies of the victims that succeeded, in the
	// measured part of the run (the load program's -raw).
	LatenciesMs  []float64 `json:"latencies_ms,omitempty"`
	CulpritError string    `json:"culprit_error,omitempty"`
}

// Binaries are the two builds of the load program.
type Binaries struct {
	Released string `json:"released"`
	Patched  string `json:"patched"`
	// Server is the server module's version, Source the module cache's
	// directory the patched copy was made from.
	Server string `json:"server"`
	Source string `json:"source"`
	// Added and Removed are the patch's lines.
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// Build builds the load program of s of the integration module in dir
// into out, released and patched; out also receives the patched source
// (out/server) and the build's go.mod (out/patched.mod). out must be empty
// or absent.
func Build(ctx context.Context, s Spec, dir, out string) (Binaries, error) {
	var b Binaries
	dir, err := filepath.Abs(dir)
	if err != nil {
		return b, err
	}
	if out, err = filepath.Abs(out); err != nil {
		return b, err
	}
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return b, fmt.Errorf("build: %s is not empty", out)
	}
	patch, err := os.ReadFile(filepath.Join(dir, s.PatchFile))
	if err != nil {
		return b, fmt.Errorf("build: %w", err)
	}
	b.Added, b.Removed = Count(patch)
	var mod struct{ Dir, Version, Error string }
	o, err := goCmd(ctx, dir, "mod", "download", "-json", s.ServerModule)
	if err == nil {
		err = json.Unmarshal(o, &mod)
	}
	if err == nil && mod.Error != "" {
		err = errors.New(mod.Error)
	}
	if err == nil && mod.Dir == "" {
		err = errors.New("no directory in the module cache")
	}
	if err != nil {
		return b, fmt.Errorf("build: finding %s in the module cache: %w", s.ServerModule, err)
	}
	b.Server, b.Source = mod.Version, mod.Dir
	server := filepath.Join(out, "server")
	if err := copyTree(mod.Dir, server); err != nil {
		return b, fmt.Errorf("build: copying %s: %w", mod.Dir, err)
	}
	if err := apply(ctx, server, filepath.Join(dir, s.PatchFile)); err != nil {
		return b, err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return b, err
	}
	gosum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return b, err
	}
	gomod = fmt.Appendf(gomod, "\nreplace %s => %s\n", s.ServerModule, server)
	modfile := filepath.Join(out, "patched.mod")
	if err := os.WriteFile(modfile, gomod, 0o644); err != nil {
		return b, err
	}
	if err := os.WriteFile(filepath.Join(out, "patched.sum"), gosum, 0o644); err != nil {
		return b, err
	}
	b.Released, b.Patched = filepath.Join(out, s.Load+"-released"), filepath.Join(out, s.Load+"-patched")
	if _, err := goCmd(ctx, dir, "build", "-o", b.Released, "./cmd/"+s.Load); err != nil {
		return b, fmt.Errorf("build: the released server: %w", err)
	}
	if _, err := goCmd(ctx, dir, "build", "-modfile="+modfile, "-o", b.Patched, "./cmd/"+s.Load); err != nil {
		return b, fmt.Errorf("build: the patched server: %w", err)
	}
	return b, nil
}

// Count returns the lines a unified diff adds and removes.
func Count(patch []byte) (added, removed int) {
	sc := bufio.NewScanner(bytes.NewReader(patch))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed
}

// goCmd runs the go command in dir, outside any workspace (an integration
// is a module of its own: its server needs a newer go than the
// workspace's), and returns its standard output.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		return o, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return o, nil
}

// apply applies the patch at path to the tree at dir.
func apply(ctx context.Context, dir, path string) error {
	var cmd *exec.Cmd
	if _, err := exec.LookPath("patch"); err == nil {
		cmd = exec.CommandContext(ctx, "patch", "-p1", "--batch", "--forward", "--quiet", "-i", path)
	} else {
		cmd = exec.CommandContext(ctx, "git", "apply", "-p1", path)
	}
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build: applying %s: %w: %s", path, err, strings.TrimSpace(string(o)))
	}
	return nil
}

// copyTree copies the regular files under src to dst, writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

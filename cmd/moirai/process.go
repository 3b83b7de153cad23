package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The processes a bench run starts besides its own: the servers of the
// multi-process suites (this program re-executed, or the benchmark
// module's upstream, built on first use).

// startConfigured starts exe with args and --config c (as JSON), a server
// process as startProcess runs one, and waits for its address.
func startConfigured(ctx context.Context, role string, c any, exe string, args ...string) (string, func() error, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", nil, err
	}
	return startProcess(ctx, role, exe, append(args, "--config", string(b))...)
}

// startProcess runs a server process that prints "listening ADDR" on its
// standard output once it serves and lives until its standard input is
// closed, and waits for its address. role names it in errors.
func startProcess(ctx context.Context, role, exe string, args ...string) (string, func() error, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() error {
		stdin.Close()
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() != nil {
			return nil // killed because the invocation was cancelled
		}
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = stop()
		return "", nil, fmt.Errorf("server %s did not start (read %q: %v)", role, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return addr, stop, nil
}

// peersBinary builds, once, the benchmark module's upstream for the
// static controller (bench/peers/cmd/pathfence-static).
type peersBinary struct {
	once sync.Once
	bin  string
	dir  string
	err  error
}

func (p *peersBinary) path(ctx context.Context, log io.Writer) (string, error) {
	p.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			p.err = fmt.Errorf("the static controller runs the benchmark module's upstream: %w", err)
			return
		}
		p.dir, err = os.MkdirTemp("", "moirai-peers-")
		if err != nil {
			p.err = err
			return
		}
		p.bin = filepath.Join(p.dir, "pathfence-static")
		fmt.Fprintln(log, "building bench/peers/cmd/pathfence-static for the static controller…")
		build := exec.CommandContext(ctx, "go", "build", "-o", p.bin, "./cmd/pathfence-static")
		build.Dir = filepath.Join(root, "bench", "peers")
		if out, err := build.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("building the static controller's upstream in %s: %v\n%s", build.Dir, err, out)
		}
	})
	return p.bin, p.err
}

func (p *peersBinary) remove() {
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

// moduleRoot finds the moirai source tree from the working directory:
// the directory whose go.mod declares the module and which holds
// bench/peers.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isMoiraiRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it from within the moirai source tree (no go.mod of github.com/moirai-go/moirai with bench/peers above the working directory)")
		}
		dir = parent
	}
}

func isMoiraiRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "module github.com/moirai-go/moirai" {
			_, err := os.Stat(filepath.Join(dir, "bench", "peers", "go.mod"))
			return err == nil
		}
	}
	return false
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// TestMain runs the tests, or, with MOIRAI_TEST_RUN_MAIN=1, the command
// itself (a test that needs `moirai` as a process of its own runs the
// test binary so).
func TestMain(m *testing.M) {
	if os.Getenv("MOIRAI_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// run executes the command tree in-process with args.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestVersionJSON(t *testing.T) {
	out, _, err := run(t, "version", "-o", "json")
	if err != nil {
		t.Fatalf("version -o json: %v", err)
	}
	var got versionInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json printed %q: %v", out, err)
	}
	if got.Version == "" {
		t.Error("empty version")
	}
	want := versionInfo{Version: got.Version, Commit: got.Commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version -o json (-want +got):\n%s", diff)
	}
}

func TestVersionTable(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	for _, re := range []string{`(?m)^moirai\s+\S+$`, `(?m)^go\s+go`, `(?m)^platform\s+` + runtime.GOOS + "/" + runtime.GOARCH + `$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("version output lacks %s:\n%s", re, out)
		}
	}
}

func TestBuildVersion(t *testing.T) {
	tests := []struct {
		name       string
		bi         *debug.BuildInfo
		ok         bool
		wantVer    string
		wantCommit string
	}{
		{"no build info", nil, false, "devel", ""},
		{"work tree", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel", ""},
		{"test binary", &debug.BuildInfo{}, true, "devel", ""},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, true, "v0.1.0", ""},
		{"vcs", &debug.BuildInfo{
			Main:     debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}},
		}, true, "devel", "abc123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := buildVersion(func() (*debug.BuildInfo, bool) { return tt.bi, tt.ok })
			if v.Version != tt.wantVer || v.Commit != tt.wantCommit {
				t.Errorf("got %q, %q; want %q, %q", v.Version, v.Commit, tt.wantVer, tt.wantCommit)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"bad output", []string{"version", "-o", "yaml"}, `-o "yaml"`},
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown flag", []string{"version", "--nope"}, "unknown flag"},
		{"extra argument", []string{"version", "x"}, "takes no arguments"},
		{"short demo", []string{"demo", "--duration", "1s"}, "--duration 1s is too short"},
		{"bad rate", []string{"demo", "--rate", "0"}, "--rate"},
		{"bad rate syntax", []string{"demo", "--rate", "fast"}, "invalid argument"},
		{"bad interval", []string{"demo", "--interval", "1ms"}, "--interval"},
		{"bad slo", []string{"demo", "--slo", "10us"}, "--slo"},
		{"bad only", []string{"demo", "--only", "both"}, "--only"},
		{"flag of another suite", []string{"bench", "run", "--suite", "dagor", "--rounds", "2"}, "--rounds applies to suites cpu, etcd, prometheus, tree, postgres and mysql only"},
		{"bad culprit shape", []string{"bench", "run", "--culprit", "twice"}, `--culprit "twice": want once or stream`},
		{"noisy clients without a stream", []string{"bench", "run", "--noisy-clients", "8"}, "--noisy-clients 8: want 1 to 256, with --culprit stream"},
		{"bad objective scale", []string{"bench", "run", "--slo-scale", "0"}, "--slo-scale 0: want a factor above 0"},
		{"objective scale on the cpu suite", []string{"bench", "run", "--suite", "cpu", "--slo-scale", "0.5"}, "--slo-scale applies to suite inproc only"},
		{"culprit shape on the dagor suite", []string{"bench", "run", "--suite", "dagor", "--culprit", "stream"}, "--culprit applies to suite inproc only"},
		{"no-culprit on the cpu suite", []string{"bench", "run", "--suite", "cpu", "--no-culprit"}, "--no-culprit applies to"},
		{"bad host load", []string{"bench", "run", "--host-load", "65"}, "--host-load 65: want 0 to 64 processes"},
		{"host load on the cpu suite", []string{"bench", "run", "--suite", "cpu", "--host-load", "2"}, "--host-load applies to suite inproc only"},
		{"alert interval above interval", []string{"guard", "--dsn", "postgres://x@127.0.0.1:1/db", "--alert-interval", "1s"}, "--alert-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("%v: error %v, want one mentioning %q", tt.args, err, tt.wantErr)
			}
			if got := exitCode(err); got != ExitBadArgs {
				t.Errorf("exit code %d, want ExitBadArgs (%d)", got, ExitBadArgs)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitSuccess},
		{errors.New("boom"), ExitError},
		{usageErrorf("bad"), ExitBadArgs},
		{fmt.Errorf("demo: %w", context.Canceled), ExitInterrupted},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// The demo runs in-process for its shortest duration; the assertions are
// structural, never about timing.
func TestDemo(t *testing.T) {
	report := filepath.Join(t.TempDir(), "demo.html")
	out, _, err := run(t, "demo", "--duration", "2s", "--rate", "40", "--interval", "200ms", "--seed", "3", "--report", report)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(out, "report: "+report) {
		t.Errorf("report %s: %v, %d bytes; output names it: %v", report, err, len(b), strings.Contains(out, "report: "+report))
	}
	for _, re := range []string{
		`(?m)^table:orders\s+lock\s+1\s+[1-9]\d*\s`,            // one holder, some waiters
		`(?m)^#\d+\s+SELECT orders FOR UPDATE\s.*table:orders`, // the culprit, holding
		`(?m)^#\d+\s+INSERT orders\s.*-\s+table:orders \S+$`,   // an insert, waiting
		`(?m)^--- summary ---$`,
		`closed cleanly`,
		`(?m)^=== run 2 of 2: with moirai`,
		`(?m)^--- decisions \(\d+\) ---$`,
		`(?m)^=== side by side`,
		`(?m)^culprit\s+completed 2 of 2 batches\s+cancelled by moirai`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("demo output lacks %s", re)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("demo output to a buffer contains ANSI escapes")
	}
	if t.Failed() {
		t.Log("\n" + out)
	}
}

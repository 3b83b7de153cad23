package build_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/integrations/prometheus/build"
)

// The integration's promise: a patch of at most 40 added lines.
func TestPatchIsSmall(t *testing.T) {
	p, err := os.ReadFile("../" + build.PatchFile)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := build.Count(p); a > 40 || a == 0 {
		t.Errorf("the patch adds %d lines, want 1 to 40", a)
	}
}

// TestPatchedServer builds the load program on the released and the
// patched module (the module proxy or cache must hold Prometheus
// v0.316.0) and runs the patched one under the reported overload: moirai
// cancels heavy queries through their context and no victim; the released
// one refuses to run moirai.
func TestPatchedServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Prometheus twice and runs it: not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := build.Build(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b.Server != "v0.316.0" {
		t.Errorf("server %s, want v0.316.0", b.Server)
	}
	if out, err := exec.CommandContext(ctx, b.Released, "-runs", "moirai", "-series", "400").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "released") {
		t.Errorf("released build under moirai: %v: %s; want it refused", err, out)
	}
	out, err := exec.CommandContext(ctx, b.Patched, "-runs", "moirai", "-warmup", "1s", "-duration", "6s").Output()
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Patched          bool `json:"patched"`
		Victims          int  `json:"victims"`
		VictimsCancelled int  `json:"victims_cancelled"`
		VictimsFailed    int  `json:"victims_failed"`
		Sent             int  `json:"culprit_sent"`
		CulpritCancelled int  `json:"culprit_cancelled"`
		CulpritFailed    int  `json:"culprit_failed"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		t.Fatalf("no result: %s", out)
	}
	if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.Patched || r.Victims == 0 || r.Sent == 0 {
		t.Fatalf("nothing measured: %+v", r)
	}
	if r.VictimsCancelled != 0 || r.VictimsFailed != 0 {
		t.Errorf("%d victims cancelled, %d failed; want none", r.VictimsCancelled, r.VictimsFailed)
	}
	if r.CulpritCancelled == 0 || r.CulpritFailed != 0 {
		t.Errorf("heavy queries: %d cancelled, %d failed otherwise; want some cancelled and none failed", r.CulpritCancelled, r.CulpritFailed)
	}
}

// The case study lists the patch as it is.
func TestDocsListThePatch(t *testing.T) {
	p, err := os.ReadFile("../" + build.PatchFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/cases/prometheus.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, p) {
		t.Error("docs/cases/prometheus.md does not list integrations/prometheus/prometheus.patch as it is")
	}
}

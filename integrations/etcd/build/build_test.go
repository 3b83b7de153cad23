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

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/integrations/etcd/build"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
// patched server (the module proxy or cache must hold etcd v3.7.3) and
// runs each once under the reported overload: on the patched server
// moirai cancels large ranges through their context and no victim; the
// released one refuses to run moirai.
func TestPatchedServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd twice and runs it: not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := build.Build(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b.Server != "v3.7.3" {
		t.Errorf("server %s, want v3.7.3", b.Server)
	}
	if out, err := exec.CommandContext(ctx, b.Released, "-runs", "moirai", "-keys", "1000").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "released") {
		t.Errorf("released build under moirai: %v: %s; want it refused", err, out)
	}
	out, err := exec.CommandContext(ctx, b.Patched, "-runs", "moirai", "-keys", "400000",
		"-warmup", "1s", "-duration", "4s").Output()
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
		t.Errorf("large ranges: %d cancelled, %d failed otherwise; want some cancelled and none failed", r.CulpritCancelled, r.CulpritFailed)
	}
}

// The case study lists the patch as it is.
func TestDocsListThePatch(t *testing.T) {
	p, err := os.ReadFile("../" + build.PatchFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/cases/etcd.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, p) {
		t.Error("docs/cases/etcd.md does not list integrations/etcd/etcd.patch as it is")
	}
}

package etcdsuite

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench/serversuite"
	"github.com/moirai-go/moirai/bench/serversuite/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelect(t *testing.T) {
	cs, ctls, err := Spec.Select("all", "none,moirai")
	if err != nil || len(cs) != 2 || len(ctls) != 2 || ctls[1].Name != "moirai" || !ctls[1].Patched {
		t.Fatalf("Select: %v %v %v", cs, ctls, err)
	}
	if _, _, err := Spec.Select("keys-only,nope", "all"); err == nil || !strings.Contains(err.Error(), "keys-only, full-range") {
		t.Errorf("unknown case: %v, want the names listed", err)
	}
	if _, _, err := Spec.Select("all", "pbox"); err == nil || !strings.Contains(err.Error(), "none, moirai, timeout, ratelimit, paginate") {
		t.Errorf("unknown controller: %v, want the names listed", err)
	}
}

// TestExecute runs the suite on a fake integration module: etcdload gets
// the case's culprit and the keys, a victim's failure fails its row, and
// the results name etcd's module and the patch's size.
func TestExecute(t *testing.T) {
	dir := servertest.Integration(t, Spec, map[string]servertest.Run{
		"normal": {Factor: 1}, "none": {Factor: 10}, "moirai": {Factor: 1.5}, "timeout": {Factor: 8, Failed: 1},
		"ratelimit": {Factor: 2}, "paginate": {Factor: 3},
	})
	cs, ctls, err := Spec.Select("full-range", "all")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Spec.Execute(context.Background(), serversuite.Options{Dir: dir, Cases: cs, Controllers: ctls})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if (r.Controller == "timeout") != (r.Error == "a victim failed: deadline") {
			t.Errorf("%s: error %q, want the timeout row failed by its victim only", r.Controller, r.Error)
		}
	}
	if got := res.Params["etcd"]; !strings.HasPrefix(got, "go.etcd.io/etcd/server/v3 ") || res.Params["keys"] == "" {
		t.Errorf("params %v: want etcd's module and the keys", res.Params)
	}
	b, err := os.ReadFile(servertest.Args(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "-culprit full -keys 600000 -warmup 1s -duration 4s ") {
		t.Errorf("etcdload ran with %q", b)
	}
}

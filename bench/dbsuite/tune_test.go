package dbsuite

import (
	"slices"
	"testing"
	"time"
)

func TestSelectControllersTuned(t *testing.T) {
	cs, err := SelectControllers(PostgresControllers(), []string{"none", "timeout", "timeout@sweep", "ptkill@2s", "guard"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	want := []string{"none", "timeout", "guard", "timeout@1s/1s", "timeout@2s/1s", "timeout@10s/5s", "ptkill@2s"}
	if !slices.Equal(names, want) {
		t.Fatalf("controllers %v, want %v", names, want)
	}
	opt := &Options{StatementTimeout: 5 * time.Second, LockTimeout: 2 * time.Second, BusyTime: 5 * time.Second}
	if o := cs[4].apply(opt); o.StatementTimeout != 2*time.Second || o.LockTimeout != time.Second || o.BusyTime != 5*time.Second || cs[4].Base() != "timeout" {
		t.Errorf("%s: statement %v, lock %v, busy %v, base %q", cs[4].Name, o.StatementTimeout, o.LockTimeout, o.BusyTime, cs[4].Base())
	}
	if o := cs[6].apply(opt); o.BusyTime != 2*time.Second || o.StatementTimeout != 5*time.Second || cs[6].Base() != "ptkill" {
		t.Errorf("%s: busy %v, statement %v", cs[6].Name, o.BusyTime, o.StatementTimeout)
	}
	if o := cs[1].apply(opt); o != opt || opt.StatementTimeout != 5*time.Second {
		t.Error("the default controller changed the options")
	}
	if all, err := SelectControllers(MySQLControllers(), nil); err != nil || len(all) != 4 {
		t.Errorf("all: %v, %v", all, err)
	}
	for _, bad := range []string{"guard@1s", "none@sweep", "timeout@2s", "timeout@0s/1s", "ptkill@1500ms", "ptkill@fast", "nope@1s"} {
		if _, err := SelectControllers(PostgresControllers(), []string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

package debugpage_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cpu"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/task"
)

// TestAdmissionSection: an overloaded DAGOR's level and refusals per
// business priority are on the page.
func TestAdmissionSection(t *testing.T) {
	d := admit.NewDAGOR(admit.WithWindow(time.Second, 100))
	now := time.Duration(0)
	var prios []task.Priority
	for b := uint8(0); b < 4; b++ {
		for u := uint8(0); u < admit.UserLevels; u += 8 {
			prios = append(prios, task.Priority{Business: b, User: u})
		}
	}
	for w := 0; w < 30; w++ { // windows of 100 requests queued 50 ms
		for i := range 100 {
			if d.AdmitPriority(now, prios[i%len(prios)]) {
				d.Started(now, 50*time.Millisecond)
			}
			now += time.Millisecond
		}
	}
	if d.Level() == admit.AdmitAll {
		t.Fatal("the level never fell")
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	code, body := get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.AdmissionSection("admission <grpc>", d)}}), "/debug/moirai")
	l := d.Level()
	for _, want := range []string{"admission &lt;grpc&gt;", "overloaded", "business " + strconv.Itoa(int(l.Business)) + ", user " + strconv.Itoa(int(l.User)), "B3: "} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("page %d without %q:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, "admission <grpc>") {
		t.Error("the section's title is not escaped")
	}
}

// steady is a Reader of a host whose busy time grows twice as fast as
// the process's: the process's share is one half.
type steady struct{ n time.Duration }

func (s *steady) Read() (cpu.Sample, error) {
	s.n += 10 * time.Millisecond
	return cpu.Sample{Self: s.n, Busy: 2 * s.n}, nil
}

// TestCPUSection: the budget, its derivation, and the pool's state.
func TestCPUSection(t *testing.T) {
	b := cpu.Budget{CPUs: 1.5, Host: 4, Affinity: 4, Quota: 1.5, Limit: "cgroup quota", Cgroup: "v2",
		Steps: []cpu.Step{
			{Source: "affinity", Value: "0-3", CPUs: 4, Note: "4 CPUs"},
			{Source: "cgroup v2", File: "/sys/fs/cgroup/app/cpu.max", Value: "150000 100000", CPUs: 1.5, Note: "1.5 CPUs"},
			{Source: "cgroup v2", File: "/sys/fs/cgroup/cpu.max", Err: "missing", Note: "no limit at this level"},
		}}
	p, err := cpu.NewPool(cpu.WithBudget(b.CPUs), cpu.WithReader(&steady{}), cpu.WithTick(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	code, body := get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.CPUSection("cpu", b, p)}}), "/debug/moirai")
	for _, want := range []string{"1.50 CPUs (limit: cgroup quota; host 4, affinity 4)", "/sys/fs/cgroup/app/cpu.max: 150000 100000 — 1.5 CPUs",
		"missing; no limit at this level", "active ", " of 2 (overcommit 1)", "share"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("page %d without %q:\n%s", code, want, body)
		}
	}
	// Without a pool, the budget alone.
	_, body = get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.CPUSection("cpu", b, nil)}}), "/debug/moirai?format=json")
	if !strings.Contains(body, "1.50 CPUs") || strings.Contains(body, "active ") {
		t.Errorf("JSON without the budget, or with a pool:\n%s", body)
	}
}

// A nil admitter is shown as none, not a crash of the page.
func TestAdmissionSectionNil(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	code, body := get(t, debugpage.Handler(ctl, debugpage.Config{Sections: []debugpage.Section{
		debugpage.AdmissionSection("admission", nil)}}), "/debug/moirai")
	if code != 200 || !strings.Contains(body, "no admitter") {
		t.Errorf("page %d:\n%s", code, body)
	}
}

package debugpage

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/cpu"
)

// AdmissionSection returns a section showing a DAGOR admitter's current
// admission level, whether its last window was overloaded, and the
// arrivals it refused per business priority (only priorities with
// refusals).
func AdmissionSection(title string, d *admit.DAGOR) Section {
	return admissionSection{title, d}
}

type admissionSection struct {
	title string
	d     *admit.DAGOR
}

func (s admissionSection) Title() string { return s.title }

func (s admissionSection) Rows() [][2]string {
	if s.d == nil {
		return [][2]string{{"level", "no admitter"}}
	}
	l := s.d.Level()
	level := fmt.Sprintf("business %d, user %d (admits priorities B/U at or below it; %d/%d admits everyone)",
		l.Business, l.User, admit.AdmitAll.Business, admit.AdmitAll.User)
	if l == admit.AdmitAll {
		level = fmt.Sprintf("%d/%d: admits everyone", l.Business, l.User)
	}
	state := "calm"
	if s.d.Overloaded() {
		state = "overloaded (the last window's mean queueing time was above the threshold)"
	}
	var rej [admit.BusinessLevels]int64
	s.d.RejectedInto(&rej)
	var parts []string
	total := int64(0)
	for b, n := range rej {
		if n > 0 {
			parts = append(parts, "B"+strconv.Itoa(b)+": "+strconv.FormatInt(n, 10))
			total += n
		}
	}
	refused := "none"
	if total > 0 {
		refused = fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
	}
	return [][2]string{{"level", level}, {"state", state}, {"refused", refused}}
}

// CPUSection returns a section showing the CPU budget of b (how it was
// derived) and, when p is not nil, the state of a neighbour-aware pool:
// its limit, active count, running and waiting work, and the share of the
// host's busy CPU time that is this process's.
func CPUSection(title string, b cpu.Budget, p *cpu.Pool) Section {
	return cpuSection{title, b, p}
}

type cpuSection struct {
	title string
	b     cpu.Budget
	p     *cpu.Pool
}

func (s cpuSection) Title() string { return s.title }

func (s cpuSection) Rows() [][2]string {
	rows := [][2]string{{"budget", fmt.Sprintf("%.2f CPUs (limit: %s; host %d, affinity %d)", s.b.CPUs, s.b.Limit, s.b.Host, s.b.Affinity)}}
	for _, st := range s.b.Steps {
		v := st.Value
		if st.File != "" {
			v = st.File + ": " + v
		}
		switch {
		case st.Err != "":
			v += " — " + st.Err
			if st.Note != "" {
				v += "; " + st.Note
			}
		case st.Note != "":
			v += " — " + st.Note
		}
		rows = append(rows, [2]string{"· " + st.Source, v})
	}
	if s.p == nil {
		return rows
	}
	ps := s.p.Stats()
	share := "not measured yet"
	if !math.IsNaN(ps.Share) {
		share = fmt.Sprintf("%.1f%% of the host's busy CPU time", 100*ps.Share)
	}
	rows = append(rows,
		[2]string{"pool", fmt.Sprintf("active %d of %d (overcommit %g) · running %d · waiting %d", ps.Active, ps.Limit, ps.Overcommit, ps.Running, ps.Waiting)},
		[2]string{"share", share},
		[2]string{"loop", fmt.Sprintf("%d ticks, %d changes of the active count, %d read errors, %d dropped", ps.Ticks, ps.Changes, ps.ReadErrors, ps.Dropped)})
	return rows
}

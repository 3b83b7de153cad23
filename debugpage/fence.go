package debugpage

import (
	"fmt"

	"github.com/moirai-go/moirai/fence"
)

// FenceSection returns a section showing f's reservations, one row per
// path, and, when t is not nil, the tuner's last estimate for each path it
// tunes: the path's peak throughput, the lowest concurrency that reaches
// it, and the permits it asks for.
func FenceSection(title string, f *fence.Fence, t *fence.Tuner) Section {
	return fenceSection{title, f, t}
}

type fenceSection struct {
	title string
	f     *fence.Fence
	t     *fence.Tuner
}

func (s fenceSection) Title() string { return s.title }

func (s fenceSection) Rows() [][2]string {
	st := s.f.Stats()
	var est map[string]fence.Estimate
	if s.t != nil {
		est = s.t.Estimates()
	}
	rows := [][2]string{{"pool", fmt.Sprintf("%d workers; unknown path lookups %d; misused releases %d", st.Size, st.Unknown, st.Misuse)}}
	for _, p := range st.Paths {
		v := fmt.Sprintf("permits %d · in use %d · running %d · waiting %d · completed %d · waited %d · rejected %d · lent %d",
			p.Permits, p.InUse, p.Running, p.Waiting, p.Completed, p.Waited, p.Rejected, p.Lent)
		if e, ok := est[p.Name]; ok {
			v += fmt.Sprintf(" · tuner: peak %.0f/s from concurrency %d, asks %d permits (%s)", e.Peak, e.QLower, e.Permits, e.Reason)
		}
		rows = append(rows, [2]string{p.Name, v})
	}
	return rows
}

package bench

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Outcomes the load generator records besides the server's.
const (
	outcomeUnfinished = "unfinished" // still running when the run ended
	outcomeShed       = "shed"       // not sent: too many in flight
)

// seriesStep is the width of a time-series bucket.
const seriesStep = 250 * time.Millisecond

// result is one request, as the load generator saw it.
type result struct {
	culprit    bool
	start, end time.Duration // from the start of the run
	outcome    string
}

// recorder collects results and events as they stream in; summaries are
// computed once, at the end (etcd's pkg/report style).
type recorder struct {
	mu      sync.Mutex
	results []result
	events  []Event
}

func newRecorder() *recorder { return &recorder{results: make([]result, 0, 4096)} }

func (r *recorder) add(x result) {
	r.mu.Lock()
	r.results = append(r.results, x)
	r.mu.Unlock()
}

func (r *recorder) event(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// summarize computes the run's summaries, series and events.
func (r *recorder) summarize(slo, duration time.Duration) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := &Run{SeriesStep: seriesStep, Events: slices.Clone(r.events)}
	run.Light = summarize(r.results, false, slo, duration)
	run.Culprit = summarize(r.results, true, slo, duration)

	// Series of light requests by the bucket they ended in.
	n := int((duration + seriesStep - 1) / seriesStep)
	hists := make([]*hdrhistogram.Histogram, n)
	oks := make([]int, n)
	rejects := make([]int, n)
	for _, x := range r.results {
		if x.culprit {
			continue
		}
		b := min(int(x.end/seriesStep), n-1)
		switch x.outcome {
		case outcomeOK:
			oks[b]++
			if hists[b] == nil {
				hists[b] = newHist()
			}
			_ = hists[b].RecordValue(int64((x.end - x.start) / time.Microsecond))
		case outcomeReject:
			rejects[b]++
		}
	}
	for b := range n {
		p := Point{T: time.Duration(b) * seriesStep, Throughput: float64(oks[b]) / seriesStep.Seconds()}
		if hists[b] != nil {
			p.P99Ms = float64(hists[b].ValueAtQuantile(99)) / 1e3
		}
		run.Series = append(run.Series, p)
		if rejects[b] > 0 {
			run.Events = append(run.Events, Event{T: p.T, Kind: "reject", Note: strconv.Itoa(rejects[b]) + " rejected"})
		}
	}
	slices.SortStableFunc(run.Events, func(a, b Event) int { return int(a.T - b.T) })
	return run
}

// summarize describes the light (culprit false) or culprit requests.
func summarize(rs []result, culprit bool, slo, duration time.Duration) Summary {
	var s Summary
	h := newHist()
	var sum time.Duration
	var n int
	for _, x := range rs {
		if x.culprit != culprit {
			continue
		}
		s.Sent++
		lat := x.end - x.start
		switch x.outcome {
		case outcomeOK:
			s.OK++
			if lat <= slo {
				s.WithinSLO++
			}
		case outcomeCancel:
			s.Cancelled++
			continue
		case outcomeReject:
			s.Rejected++
			continue
		case outcomeUnfinished:
			s.Unfinish++
		default:
			s.Failed++
			continue
		}
		// Completed and unfinished requests count in the latency: a victim
		// still blocked at the end has waited at least this long.
		sum += lat
		n++
		_ = h.RecordValue(int64(lat / time.Microsecond))
	}
	if n > 0 {
		s.MeanMs = float64(sum) / float64(n) / 1e6
		s.P50Ms = float64(h.ValueAtQuantile(50)) / 1e3
		s.P99Ms = float64(h.ValueAtQuantile(99)) / 1e3
		s.MaxMs = float64(h.Max()) / 1e3
	}
	if duration > 0 {
		s.Throughput = float64(s.OK) / duration.Seconds()
	}
	return s
}

// newHist returns a histogram of microseconds from 1 µs to 10 minutes at
// three significant figures.
func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
}

package serversuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/integrations/serverbuild"
)

// binaries is the build command's output.
type binaries = serverbuild.Binaries

// runResult is one line of the load program's output: the part every
// integration's load program shares.
type runResult = serverbuild.Result

// build runs the integration module in dir's build command, writing the
// two builds into out.
func (s *Suite) build(ctx context.Context, dir, out string) (binaries, error) {
	var b binaries
	cmd := exec.CommandContext(ctx, "go", "run", s.Build, "-out", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		return b, fmt.Errorf("suite %s: building %s: %w: %s", s.Name, s.Server, err, tail(stderr.Bytes()))
	}
	if err := json.Unmarshal(o, &b); err != nil {
		return b, fmt.Errorf("suite %s: building %s: %w", s.Name, s.Server, err)
	}
	return b, nil
}

// runLoad runs one process of the load program and returns its runs'
// results.
func runLoad(ctx context.Context, bin string, c Case, s *Suite, o Options, seed uint64, runs []string) ([]runResult, error) {
	args := append(slices.Clip(c.Args), "-"+s.Size, strconv.Itoa(o.Size),
		"-warmup", o.Warmup.String(), "-duration", o.Duration.String(),
		"-seed", strconv.FormatUint(seed, 10), "-runs", strings.Join(runs, ","), "-raw")
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, tail(stderr.Bytes()))
	}
	var rs []runResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r runResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(bin), err)
		}
		rs = append(rs, r)
	}
	if len(rs) != len(runs) {
		return nil, fmt.Errorf("%s: %d results for %d runs", filepath.Base(bin), len(rs), len(runs))
	}
	return rs, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// measured pools the runs of one (case, controller) over the rounds.
type measured struct {
	latencies                     []float64
	victims, ok, failed, cancel   int
	within                        float64 // victims within the objective
	throughput                    float64 // summed over runs
	runs                          int
	sent, cok, ccancel, ctimeout  int
	cfailed, climited             int
	culpritMs                     float64 // summed over runs
	lost                          float64
	cancellations                 int64
	firstError, firstCulpritError string
}

func (m *measured) add(r runResult) {
	m.latencies = append(m.latencies, r.LatenciesMs...)
	m.victims += r.Victims
	m.ok += r.VictimsOK
	m.failed += r.VictimsFailed
	m.cancel += r.VictimsCancel
	m.within += r.SLOAttainment * float64(r.Victims)
	m.throughput += r.Throughput
	m.runs++
	m.sent += r.CulpritSent
	m.cok += r.CulpritOK
	m.ccancel += r.CulpritCancel
	m.ctimeout += r.CulpritTimeout
	m.cfailed += r.CulpritFailed
	m.climited += r.CulpritLimited
	m.culpritMs += r.CulpritMeanMs
	m.lost += r.WorkLost
	m.cancellations += r.Cancelled
	if m.firstError == "" {
		m.firstError = r.FirstError
	}
	if m.firstCulpritError == "" {
		m.firstCulpritError = r.CulpritError
	}
}

func (m *measured) p99() float64 { return p99(m.latencies) }

// latencies returns r's victims' latencies; none for a nil run.
func latencies(r *runResult) []float64 {
	if r == nil {
		return nil
	}
	return r.LatenciesMs
}

// p99 returns the 99th percentile of the latencies (0 for none).
func p99(lat []float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(0.99*float64(len(s))))-1))]
}

// mean returns the victims' mean latency, in milliseconds.
func (m *measured) mean() float64 {
	if len(m.latencies) == 0 {
		return 0
	}
	sum := 0.0
	for _, l := range m.latencies {
		sum += l
	}
	return sum / float64(len(m.latencies))
}

func (m *measured) meanThroughput() float64 {
	if m.runs == 0 {
		return 0
	}
	return m.throughput / float64(m.runs)
}

func (m *measured) row(s *Suite, kase, ctl string, base *measured, noCulprit bool) bench.Row {
	r := bench.Row{Suite: s.Name, Case: kase, Controller: ctl, NoCulprit: noCulprit,
		P99Ms: m.p99(), Throughput: m.meanThroughput(),
		VictimMeanMs: m.mean(), VictimMeanNormalMs: base.mean(),
		CulpritsCancelled: m.ccancel, VictimsCancelled: m.cancel, Cancelled: int(m.cancellations),
		WorkLost: m.lost}
	if bp := base.p99(); bp > 0 {
		r.P99Norm = r.P99Ms / bp
	}
	if bt := base.meanThroughput(); bt > 0 {
		r.ThroughputNorm = r.Throughput / bt
	}
	if m.victims > 0 {
		r.SLOAttainment = m.within / float64(m.victims)
		r.DropRate = float64(m.failed+m.cancel) / float64(m.victims)
	}
	if m.firstError != "" && !s.FailuresMeasured {
		r.Error = "a victim failed: " + m.firstError
	}
	return r
}

// fate says what became of the culprit's requests.
func (m *measured) fate(s *Suite) string {
	held := ""
	if s.Limiter {
		held = fmt.Sprintf("; %d held back by the limiter", m.climited)
	}
	f := fmt.Sprintf("%d sent: %d completed, %d cancelled by the controller, %d timed out, %d %s%s; mean %.0fms; work lost %.2fs",
		m.sent, m.cok, m.ccancel, m.ctimeout, m.cfailed, s.Failed, held, m.culpritMs/float64(max(m.runs, 1)), m.lost)
	if m.firstCulpritError != "" {
		f += "; first failure: " + m.firstCulpritError
	}
	return f
}

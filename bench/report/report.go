// Package report turns the results of `moirai bench run` into what people
// read: a self-contained HTML page with the table of rows and a time-series
// figure per case ([HTML]), the text of docs/RESULTS.md ([Markdown]), and an
// aligned table for the terminal ([Table]). [Load] and [Save] read and write
// results.json.
//
// Everything in a [bench.Results] is treated as data: case and controller
// names, event notes and error messages are escaped wherever they are
// written.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moirai-go/moirai/bench"
)

// Load reads a results.json written by [Save] (`moirai bench run --out`).
// A file that is not a results file (not JSON, JSON of another shape, the
// rows printed by `moirai bench run -o json`) is reported as such, with the
// path.
func Load(path string) (*bench.Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a moirai bench results file: %w", path, err)
	}
	return r, nil
}

// decode parses and checks the content of a results file.
func decode(data []byte) (*bench.Results, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return nil, errors.New("the file is empty")
	case trimmed[0] == '[':
		return nil, errors.New("it holds a JSON array; expected the object written to results.json by `moirai bench run --out DIR`")
	case trimmed[0] != '{':
		return nil, errors.New("it is not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		// The rows printed by `-o json` are objects one after another.
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		var first map[string]json.RawMessage
		if dec.Decode(&first) == nil && dec.More() {
			if _, ok := first["controller"]; ok {
				return nil, errors.New("it holds a stream of rows (the output of `moirai bench run -o json`); expected the results.json written by `moirai bench run --out DIR`")
			}
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, ok := fields["rows"]; !ok {
		if _, ok := fields["controller"]; ok {
			return nil, errors.New("it holds one row (the output of `moirai bench run -o json`); expected the results.json written by `moirai bench run --out DIR`")
		}
		return nil, errors.New(`it has no "rows" field`)
	}
	if _, ok := fields["suite"]; !ok {
		return nil, errors.New(`it has no "suite" field`)
	}
	var r bench.Results
	if err := json.Unmarshal(trimmed, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Save writes r to path as indented JSON. The file is replaced atomically:
// a reader sees the old results or the new ones, never half of them.
func Save(path string, r *bench.Results) error {
	if r == nil {
		return errors.New("report.Save: nil results")
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	data = append(data, '\n')
	return writeAtomic(path, data)
}

// SaveTrimmed writes to path what the reports read of r (see [Trim]), in
// the compact form of [WriteCompact], replacing the file atomically as
// [Save] does. It leaves r unchanged.
func SaveTrimmed(path string, r *bench.Results) error {
	if r == nil {
		return errors.New("report.SaveTrimmed: nil results")
	}
	t := *r
	Trim(&t)
	var b bytes.Buffer
	if err := WriteCompact(&b, &t); err != nil {
		return err
	}
	return writeAtomic(path, b.Bytes())
}

// writeAtomic replaces path with data: a reader sees the old content or the
// new, never half of it.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// caseGroup is the rows and runs of one case.
type caseGroup struct {
	Suite, Case string
	Rows        []bench.Row
	Runs        []*bench.Run
}

// suiteGroup is the cases of one suite, in the order they first appear.
type suiteGroup struct {
	Name  string
	Cases []*caseGroup
}

// rows returns the rows of every case of the suite.
func (s *suiteGroup) rows() []bench.Row {
	var rows []bench.Row
	for _, c := range s.Cases {
		rows = append(rows, c.Rows...)
	}
	return rows
}

// group sorts the rows and runs of r by suite and case, keeping the order in
// which they first appear. Runs have no suite: they go to the suite of their
// case's rows, or r.Suite.
func group(r *bench.Results) []*suiteGroup {
	var suites []*suiteGroup
	bySuite := map[string]*suiteGroup{}
	type key struct{ suite, name string }
	byCase := map[key]*caseGroup{}
	caseSuite := map[string]string{} // case name -> suite of its first row
	get := func(suite, name string) *caseGroup {
		s := bySuite[suite]
		if s == nil {
			s = &suiteGroup{Name: suite}
			bySuite[suite] = s
			suites = append(suites, s)
		}
		c := byCase[key{suite, name}]
		if c == nil {
			c = &caseGroup{Suite: suite, Case: name}
			byCase[key{suite, name}] = c
			s.Cases = append(s.Cases, c)
		}
		return c
	}
	for _, row := range r.Rows {
		suite := row.Suite
		if suite == "" {
			suite = r.Suite
		}
		if _, ok := caseSuite[row.Case]; !ok {
			caseSuite[row.Case] = suite
		}
		c := get(suite, row.Case)
		c.Rows = append(c.Rows, row)
	}
	for i := range r.Runs {
		run := &r.Runs[i]
		suite, ok := caseSuite[run.Case]
		if !ok {
			suite = r.Suite
		}
		c := get(suite, run.Case)
		c.Runs = append(c.Runs, run)
	}
	return suites
}

// average is one controller's means over the cases of a suite.
type average struct {
	Controller string
	// Cases is the number of rows averaged; Failed the number of rows of
	// the controller that failed and are left out.
	Cases, Failed     int
	ThroughputNorm    float64
	P99Norm           float64
	DropRate          float64
	VictimsCancelled  int
	CulpritsCancelled int
	SLOAttainment     float64
}

// averages returns the mean throughput_norm, p99_norm, drop_rate and SLO
// attainment and the total cancellations of each controller over rows,
// controllers in the order they first appear. Failed rows are counted, not
// averaged.
func averages(rows []bench.Row) []average {
	var out []average
	idx := map[string]int{}
	for _, row := range rows {
		i, ok := idx[row.Controller]
		if !ok {
			i = len(out)
			idx[row.Controller] = i
			out = append(out, average{Controller: row.Controller})
		}
		a := &out[i]
		if row.Error != "" {
			a.Failed++
			continue
		}
		a.Cases++
		a.ThroughputNorm += row.ThroughputNorm
		a.P99Norm += row.P99Norm
		a.DropRate += row.DropRate
		a.SLOAttainment += row.SLOAttainment
		a.VictimsCancelled += row.VictimsCancelled
		a.CulpritsCancelled += row.CulpritsCancelled
	}
	for i := range out {
		a := &out[i]
		if a.Cases > 0 {
			n := float64(a.Cases)
			a.ThroughputNorm /= n
			a.P99Norm /= n
			a.DropRate /= n
			a.SLOAttainment /= n
		}
	}
	return out
}

// sanity is the result of a case's sanity check: does its culprit degrade
// the service when nothing controls it?
type sanity struct {
	Case   string
	Status string // "degraded", "not-degraded", "failed", "unknown"
	Text   string // one sentence, plain text
}

// sanityOf reads the sanity check from the rows of a case.
func sanityOf(c *caseGroup) sanity {
	s := sanity{Case: c.Case, Status: "unknown", Text: `no uncontrolled ("none") row with the sanity check`}
	for _, row := range c.Rows {
		switch {
		case row.Controller == "none" && row.Error != "":
			return sanity{c.Case, "failed", "the uncontrolled run failed: " + row.Error}
		case row.Degraded != nil && *row.Degraded:
			return sanity{c.Case, "degraded", fmt.Sprintf("the culprit degrades the service (throughput_norm %s, p99_norm %s)",
				fmtNorm(row.ThroughputNorm), fmtNorm(row.P99Norm))}
		case row.Degraded != nil:
			return sanity{c.Case, "not-degraded", fmt.Sprintf("the culprit does NOT degrade the service (throughput_norm %s > 0.8, p99_norm %s < 2): the controllers' results on this case measure nothing",
				fmtNorm(row.ThroughputNorm), fmtNorm(row.P99Norm))}
		}
	}
	return s
}

// reduction is pBox's interference reduction ratio r = (T_i − T_s) /
// (T_i − T_o) of the victims' mean latency, and whether it is defined
// (the culprit made the victims slower).
func reduction(row bench.Row) (float64, bool) {
	ti, ts, to := row.VictimMeanUncontrolledMs, row.VictimMeanMs, row.VictimMeanNormalMs
	if row.Error != "" || ti <= 0 || ti-to <= 0 {
		return 0, false
	}
	return (ti - ts) / (ti - to), true
}

// status is the last column of a row: failure, or the sanity flag.
func status(row bench.Row) string {
	switch {
	case row.Error != "":
		return "FAILED: " + row.Error
	case row.Degraded == nil:
		return ""
	case *row.Degraded:
		return "degraded"
	default:
		return "NOT DEGRADED"
	}
}

// fmtNorm formats a normalized ratio with two decimals, fewer when large.
func fmtNorm(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'f', -1, 64)
	case math.Abs(x) >= 1000:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// fmtPct formats a fraction as a percentage.
func fmtPct(x float64) string {
	switch {
	case x > 0 && x < 0.001:
		return "<0.1%"
	case x < 1 && x > 0.999:
		return ">99.9%"
	}
	return strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
}

// fmtMs formats milliseconds with three significant digits.
func fmtMs(x float64) string {
	a := math.Abs(x)
	switch {
	case a == 0:
		return "0"
	case a < 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case a < 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// fmtCancelled formats the cancellations of a row: total (culprits/victims).
func fmtCancelled(row bench.Row) string {
	return fmt.Sprintf("%d (%d/%d)", row.Cancelled, row.CulpritsCancelled, row.VictimsCancelled)
}

// fmtVictims formats the victims' mean latencies: normal / uncontrolled /
// this run, in milliseconds.
func fmtVictims(row bench.Row) string {
	return fmtMs(row.VictimMeanNormalMs) + " / " + fmtMs(row.VictimMeanUncontrolledMs) + " / " + fmtMs(row.VictimMeanMs)
}

// fmtReduction formats the interference reduction ratio, "–" when undefined.
func fmtReduction(row bench.Row) string {
	r, ok := reduction(row)
	if !ok {
		return "–"
	}
	return fmtNorm(r)
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// machine describes where the results were measured, in one line.
func machine(m bench.Machine) string {
	var parts []string
	if m.GoVersion != "" {
		parts = append(parts, m.GoVersion)
	}
	if m.OS != "" || m.Arch != "" {
		parts = append(parts, m.OS+"/"+m.Arch)
	}
	if m.CPUs > 0 {
		cpus := strconv.Itoa(m.CPUs) + " CPUs"
		if m.CPUs == 1 {
			cpus = "1 CPU"
		}
		parts = append(parts, cpus)
	}
	if m.CPUModel != "" {
		parts = append(parts, m.CPUModel)
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// startedText formats the start time of the invocation.
func startedText(r *bench.Results) string {
	if r.Started.IsZero() {
		return "unknown"
	}
	return r.Started.Format("2006-01-02 15:04:05 MST")
}

package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const hostile = `<script>alert(1)</script>`

// synthetic returns results of 2 cases × 3 controllers (none, atropos,
// protego) plus a normal run per case, with series and events. The second
// case does not degrade, its protego row failed, and hostile text is in a
// note, an error and an event note.
func synthetic() *bench.Results {
	yes, no := true, false
	res := &bench.Results{
		Suite:    "inproc",
		Started:  time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC),
		Seed:     42,
		Duration: "4s",
		Machine:  bench.Machine{GoVersion: "go1.26.0", OS: "linux", Arch: "amd64", CPUs: 2, CPUModel: "Test CPU @ 2.0GHz"},
	}
	type ctl struct {
		name                      string
		tput, p99, drop, slo      float64
		cancelC, cancelV, reject  int
		victimMs                  float64
		degraded                  *bool
		err                       string
		blockFrom, blockTo, spike float64 // seconds, and the p99 after
	}
	cases := []struct {
		name string
		ctls []ctl
	}{
		{"table-lock", []ctl{
			{"none", 0.40, 25.0, 0.0, 0.55, 0, 0, 0, 180, &yes, "", 1.0, 3.2, 2200},
			{"atropos", 0.95, 1.6, 0.001, 0.97, 1, 0, 0, 6.5, nil, "", 1.0, 1.15, 160},
			{"protego", 0.70, 3.5, 0.12, 0.80, 0, 35, 0, 40, nil, "", 1.0, 3.2, 260},
		}},
		{"worker-slots " + hostile, []ctl{
			{"none", 0.97, 1.3, 0, 0.99, 0, 0, 0, 5.5, &no, "", 0, 0, 0},
			{"atropos", 0.99, 1.1, 0, 0.995, 1, 0, 0, 5.1, nil, "", 0, 0, 0},
			{"protego", 0, 0, 0, 0, 0, 0, 0, 0, nil, "service did not start: " + hostile, 0, 0, 0},
		}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const stepD = 100 * time.Millisecond
	const dur = 4 * time.Second
	series := func(rate float64, blockFrom, blockTo, spike float64) []bench.Point {
		var pts []bench.Point
		for t := time.Duration(0); t < dur; t += stepD {
			s := t.Seconds()
			p := bench.Point{T: t, Throughput: rate * (0.9 + 0.2*rng.Float64()), P99Ms: 4 + 2*rng.Float64()}
			switch {
			case blockTo > blockFrom && s >= blockFrom && s < blockTo:
				p.Throughput, p.P99Ms = 0, 0 // nothing completes while blocked
			case blockTo > blockFrom && s >= blockTo && s < blockTo+0.2:
				p.Throughput, p.P99Ms = rate*2.5, spike
			}
			pts = append(pts, p)
		}
		return pts
	}
	for _, c := range cases {
		res.Runs = append(res.Runs, bench.Run{
			Case: c.name, Controller: "normal", Duration: dur, SeriesStep: stepD,
			Light:  bench.Summary{Sent: 800, OK: 800, MeanMs: 5, P99Ms: 6, Throughput: 200},
			Series: series(200, 0, 0, 0),
		})
		for _, k := range c.ctls {
			res.Rows = append(res.Rows, bench.Row{
				Suite: "inproc", Case: c.name, Controller: k.name,
				ThroughputNorm: k.tput, P99Norm: k.p99, DropRate: k.drop,
				Cancelled: k.cancelC + k.cancelV, CulpritsCancelled: k.cancelC, VictimsCancelled: k.cancelV,
				Rejected: k.reject, SLOAttainment: k.slo,
				VictimMeanNormalMs: 5, VictimMeanUncontrolledMs: c.ctls[0].victimMs, VictimMeanMs: k.victimMs,
				Error: k.err, Degraded: k.degraded,
			})
			if k.err != "" {
				continue
			}
			run := bench.Run{
				Case: c.name, Controller: k.name, WithCulprit: true, Duration: dur, InjectedAt: time.Second,
				SeriesStep: stepD, Series: series(200, k.blockFrom, k.blockTo, k.spike),
				Events: []bench.Event{{T: time.Second, Kind: "culprit"}},
			}
			if k.cancelC > 0 {
				run.Events = append(run.Events, bench.Event{T: 1150 * time.Millisecond, Kind: "cancel-culprit", Note: "atropos: " + hostile})
			}
			for i := range min(k.cancelV, 12) {
				run.Events = append(run.Events, bench.Event{T: time.Second + time.Duration(i)*180*time.Millisecond, Kind: "cancel-victim", Note: "protego: lock wait near budget"})
			}
			if k.name == "protego" {
				run.Events = append(run.Events, bench.Event{T: 2 * time.Second, Kind: "reject", Note: "3 rejected"})
			}
			res.Runs = append(res.Runs, run)
		}
	}
	return res
}

func TestHTML(t *testing.T) {
	res := synthetic()
	var buf bytes.Buffer
	if err := HTML(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if dir := os.Getenv("REPORT_SAMPLE"); dir != "" {
		if err := os.WriteFile(dir, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Well-formed: every element closed, attributes quoted.
	dec := xml.NewDecoder(strings.NewReader(out))
	dec.Strict = true
	var (
		svgs      int
		inSVG     bool
		paths     = map[string]int{} // class -> count in the current svg
		perSVG    []map[string]int
		injection int
		scripts   int
		external  int
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "svg":
				svgs++
				inSVG = true
				paths = map[string]int{}
			case "path", "polyline":
				if inSVG {
					for _, a := range e.Attr {
						if a.Name.Local == "class" {
							paths[a.Value]++
						}
					}
				}
			case "g":
				for _, a := range e.Attr {
					if a.Name.Local == "class" && a.Value == "injection" {
						injection++
					}
				}
			case "script", "link", "img", "iframe", "object":
				scripts++
			}
			for _, a := range e.Attr {
				if a.Name.Local == "src" || (a.Name.Local == "href" && !strings.HasPrefix(a.Value, "#")) {
					external++
				}
			}
		case xml.EndElement:
			if e.Name.Local == "svg" {
				inSVG = false
				perSVG = append(perSVG, paths)
			}
		}
	}
	if svgs != 2 {
		t.Errorf("%d <svg> elements, want one per case (2)", svgs)
	}
	// Runs per case: normal + 3 controllers for the first, normal + 2 (the
	// failed protego row has no run) for the second.
	wantRuns := []int{4, 3}
	for i, p := range perSVG {
		if i < len(wantRuns) && (p["series tput"] != wantRuns[i] || p["series p99"] != wantRuns[i]) {
			t.Errorf("figure %d: %d throughput and %d p99 lines, want %d of each (one per run)", i, p["series tput"], p["series p99"], wantRuns[i])
		}
		if p["ev cancel-culprit"] == 0 {
			t.Errorf("figure %d: no culprit-cancellation marker", i)
		}
	}
	if perSVG[0]["ev cancel-victim"] == 0 {
		t.Error("no victim-cancellation marker")
	}
	if injection != 2 {
		t.Errorf("%d injection markers, want one per case", injection)
	}
	if scripts != 0 || external != 0 {
		t.Errorf("%d script/link/img elements and %d external references", scripts, external)
	}
	if strings.Contains(out, hostile) || strings.Contains(out, "<script") {
		t.Error("hostile text appears unescaped")
	}
	if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("hostile text does not appear escaped (was it dropped?)")
	}
	for _, ref := range []string{"http://", "https://", "url(", "@import"} {
		if strings.Contains(out, ref) {
			t.Errorf("the page refers to %q: not self-contained", ref)
		}
	}
	for _, want := range []string{
		"inproc", "2026-03-01 12:30:00 UTC", "42", "4s", "go1.26.0, linux/amd64, 2 CPUs, Test CPU @ 2.0GHz",
		"culprit injected (1.00 s)", "degraded ✓", "⚠ NOT degraded", "Sanity check failed for 1 case",
		"service did not start", "0.40", "25.0", "12.0%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	res := synthetic()
	res.Params = map[string]string{"load": "open loop at 1000 transactions/s", "guard": "interval 250 ms"}
	var buf bytes.Buffer
	if err := Markdown(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "generated by `moirai bench report` from results.json; do not edit") {
		t.Error("no generated-file banner")
	}
	if strings.Contains(out, "<script") {
		t.Error("hostile text appears unescaped")
	}
	for _, want := range []string{"seed | 42", "go1.26.0, linux/amd64, 2 CPUs", "## Suite `inproc`", "**failed**: service did not start", "**NOT DEGRADED**",
		"| parameter | value |\n|---|---|\n| guard | interval 250 ms |\n| load | open loop at 1000 transactions/s |"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}

	rows := tableAfter(t, out, "| case | controller |")
	if len(rows) != len(res.Rows) {
		t.Fatalf("%d lines in the table of rows, want %d", len(rows), len(res.Rows))
	}
	for i, cells := range rows {
		if cells[1] != "`"+res.Rows[i].Controller+"`" {
			t.Errorf("line %d: controller %q, want %q", i, cells[1], res.Rows[i].Controller)
		}
	}

	// The averages, read back from the text.
	type avg struct {
		Controller                       string
		Cases                            int
		Tput, P99, Drop                  float64
		VictimsCancelled, CulpritsCancel int
		Failed                           int
	}
	var got []avg
	for _, cells := range tableAfter(t, out, "| controller | cases |") {
		a := avg{Controller: strings.Trim(cells[0], "`"), Cases: atoi(t, cells[1]), Failed: atoi(t, cells[8])}
		if a.Cases > 0 {
			a.Tput, a.P99, a.Drop = atof(t, cells[2]), atof(t, cells[3]), atof(t, cells[4])
			a.VictimsCancelled, a.CulpritsCancel = atoi(t, cells[6]), atoi(t, cells[7])
		}
		got = append(got, a)
	}
	want := []avg{
		{Controller: "none", Cases: 2, Tput: (0.40 + 0.97) / 2, P99: (25.0 + 1.3) / 2, Drop: 0},
		{Controller: "atropos", Cases: 2, Tput: (0.95 + 0.99) / 2, P99: (1.6 + 1.1) / 2, Drop: 0.001 / 2, CulpritsCancel: 2},
		{Controller: "protego", Cases: 1, Tput: 0.70, P99: 3.5, Drop: 0.12, VictimsCancelled: 35, Failed: 1},
	}
	// The text rounds to two decimals (one for percentages).
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 0.006)); diff != "" {
		t.Errorf("averages in the Markdown (-want +got):\n%s", diff)
	}

	// Sanity check per case.
	if !strings.Contains(out, "- `table-lock`: ok — the culprit degrades the service") {
		t.Error("no sanity line for table-lock")
	}
	if !strings.Contains(out, "⚠️ **warning** — the culprit does NOT degrade the service") {
		t.Error("no sanity warning for the case that does not degrade")
	}
}

func TestAverages(t *testing.T) {
	got := averages(synthetic().Rows)
	want := []average{
		{Controller: "none", Cases: 2, ThroughputNorm: 0.685, P99Norm: 13.15, DropRate: 0, SLOAttainment: 0.77},
		{Controller: "atropos", Cases: 2, ThroughputNorm: 0.97, P99Norm: 1.35, DropRate: 0.0005, SLOAttainment: 0.9825, CulpritsCancelled: 2},
		{Controller: "protego", Cases: 1, Failed: 1, ThroughputNorm: 0.70, P99Norm: 3.5, DropRate: 0.12, SLOAttainment: 0.80, VictimsCancelled: 35},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
		t.Errorf("averages (-want +got):\n%s", diff)
	}
}

// tableAfter returns the cells of the body lines of the first Markdown
// table whose header starts with header.
func tableAfter(t *testing.T, md, header string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+header)
	if !ok {
		t.Fatalf("no table with header %q", header)
	}
	lines := strings.Split(rest, "\n")[2:] // the rest of the header, the separator
	var out [][]string
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			break
		}
		l = strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |")
		out = append(out, strings.Split(l, " | "))
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return n
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	scale := 1.0
	if strings.HasSuffix(s, "%") {
		s, scale = strings.TrimSuffix(s, "%"), 0.01
	}
	s = strings.TrimPrefix(s, "<") // "<0.1%"
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return x * scale
}

func TestTable(t *testing.T) {
	res := synthetic()
	var buf bytes.Buffer
	if err := Table(&buf, res.Rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+len(res.Rows) {
		t.Fatalf("%d lines, want a header and %d rows:\n%s", len(lines), len(res.Rows), buf.String())
	}
	// Every column starts at the same offset on every line: check the
	// columns that follow single-word cells.
	for _, col := range []string{"CONTROLLER", "TPUT_NORM", "P99_NORM", "DROP", "STATUS"} {
		at := strings.Index(lines[0], col)
		for i, l := range lines[1:] {
			if at >= len([]rune(l)) || string([]rune(l)[at-1]) != " " || string([]rune(l)[at]) == " " {
				t.Errorf("line %d: column %s does not start at offset %d:\n%s\n%s", i+1, col, at, lines[0], l)
			}
		}
	}
	for _, l := range lines {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("trailing spaces: %q", l)
		}
	}
	if !strings.Contains(lines[6], "FAILED: service did not start") || !strings.Contains(lines[4], "NOT DEGRADED") {
		t.Errorf("failure and sanity flag not shown:\n%s", buf.String())
	}
}

func TestLoadSave(t *testing.T) {
	res := synthetic()
	path := filepath.Join(t.TempDir(), "results.json")
	if err := Save(path, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("{\n  \"suite\": \"inproc\",\n")) {
		t.Errorf("not indented JSON:\n%.200s", data)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res, got); diff != "" {
		t.Errorf("round trip (-saved +loaded):\n%s", diff)
	}
	// Saving again replaces the file and leaves no temporary file.
	if err := Save(path, res); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("%d files in the directory, want 1", len(ents))
	}
}

func TestLoadBadFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "empty"},
		{"html", "<!DOCTYPE html><html></html>", "not a JSON object"},
		{"truncated", `{"suite": "inproc", "rows": [`, "invalid JSON"},
		{"other-json", `{"name": "x", "version": 2}`, `no "rows" field`},
		{"row", `{"suite": "inproc", "case": "a", "controller": "none"}`, "moirai bench run -o json"},
		{"rows-stream", "{\"suite\": \"inproc\", \"controller\": \"none\"}\n{\"suite\": \"inproc\", \"controller\": \"atropos\"}\n", "stream of rows"},
		{"array", `[{"suite": "inproc"}]`, "JSON array"},
		{"wrong-types", `{"suite": "inproc", "rows": "none"}`, "cannot unmarshal"},
	} {
		path := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, "not a moirai bench results file") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q does not name the file, say it is not a results file, and say %q", tc.name, msg, tc.want)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestNoData(t *testing.T) {
	// Empty results and runs without series still render.
	for _, res := range []*bench.Results{
		{Suite: "inproc"},
		{Suite: "inproc", Rows: []bench.Row{{Case: "a", Controller: "none"}}, Runs: []bench.Run{{Case: "a", Controller: "none"}}},
	} {
		var buf bytes.Buffer
		if err := HTML(&buf, res); err != nil {
			t.Error(err)
		}
		if strings.Contains(buf.String(), "NaN") || strings.Contains(buf.String(), "Inf") {
			t.Errorf("NaN or Inf in the page:\n%s", buf.String())
		}
		if err := Markdown(&buf, res); err != nil {
			t.Error(err)
		}
		if err := Table(&buf, res.Rows); err != nil {
			t.Error(err)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{{4, 10, 0.5}, {10, 10, 1}, {230, 4, 100}, {0.3, 4, 0.1}, {0, 4, 1}, {math.Inf(1), 4, 1}} {
		if got := niceStep(tc.span, tc.n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
	if diff := cmp.Diff([]float64{1, 2, 5, 10, 20, 50, 100}, logTicks(0, 2)); diff != "" {
		t.Errorf("logTicks(0, 2): %s", diff)
	}
	if diff := cmp.Diff([]float64{0.1, 1, 10, 100, 1000}, logTicks(-1, 3)); diff != "" {
		t.Errorf("logTicks(-1, 3): %s", diff)
	}
}

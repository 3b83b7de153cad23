package cpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime"
	"strconv"
	"strings"
)

// Budget is the number of CPUs a process may use, and how it was derived.
// It is plain data: [ReadBudget] fills it in, `moirai cpus` prints it.
type Budget struct {
	// CPUs is the budget: the smallest of the affinity mask and the
	// quotas of the process's cgroup and of every ancestor visible to it,
	// fractional (a quota of 150 ms per 100 ms period is 1.5). Always > 0.
	CPUs float64 `json:"cpus"`
	// Host is the number of online CPUs of the host.
	Host int `json:"host"`
	// Affinity is the number of CPUs in the process's affinity mask.
	Affinity int `json:"affinity"`
	// Quota is the tightest cgroup quota in CPUs, 0 if no cgroup limits
	// the process; QuotaDir is the cgroup directory that holds it.
	Quota    float64 `json:"quota,omitempty"`
	QuotaDir string  `json:"quota_dir,omitempty"`
	// Cgroup is the cgroup version the quotas were read from: "v1", "v2",
	// or "" when none could be read.
	Cgroup string `json:"cgroup,omitempty"`
	// Limit says which source set CPUs: "affinity" or "cgroup quota".
	Limit string `json:"limit"`
	// Steps is the derivation: every source consulted, in order, with the
	// value read and whether it was used or why it was not.
	Steps []Step `json:"steps"`
}

// Step is one source consulted while deriving a [Budget].
type Step struct {
	// Source names the source: "host", "affinity", "cgroup v1", "cgroup v2".
	Source string `json:"source"`
	// File is the file read (relative to the root of the file system), if
	// any.
	File string `json:"file,omitempty"`
	// Value is what was read, trimmed; empty if nothing could be read.
	Value string `json:"value,omitempty"`
	// CPUs is what the source allows; 0 if it sets no limit or was not
	// used.
	CPUs float64 `json:"cpus,omitempty"`
	// Note says what the value means ("unlimited", "2 CPUs") or, when Err
	// is set, what was done instead ("next source", "level ignored").
	Note string `json:"note,omitempty"`
	// Err is why the source was not used: missing or unreadable file,
	// malformed or absurd value. Empty when the value was used.
	Err string `json:"error,omitempty"`
}

// String formats the budget in one line: "1.5 CPUs (cgroup quota; host 2,
// affinity 2)".
func (b Budget) String() string {
	return fmt.Sprintf("%s CPUs (%s; host %d, affinity %d)", FormatCPUs(b.CPUs), b.Limit, b.Host, b.Affinity)
}

// FormatCPUs formats a number of CPUs with at most three decimals and no
// trailing zeros.
func FormatCPUs(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}

// Files read by ReadBudget, relative to the root of its file system.
const (
	fileCgroup    = "proc/self/cgroup"
	fileMountinfo = "proc/self/mountinfo"
	fileStatus    = "proc/self/status"
	fileOnline    = "sys/devices/system/cpu/online"
	fileProcStat  = "proc/stat"
)

// ReadBudget derives the CPU budget of the calling process from the file
// system fsys, rooted where "/" is (os.DirFS("/") for the real one, a fake
// tree in tests). It never fails: a source that is missing, unreadable,
// malformed or absurd is recorded in the budget's steps with the reason,
// and the next source is used. With nothing readable at all the budget is
// runtime.NumCPU.
//
// The sources, in order:
//
//   - host: the online CPUs (sys/devices/system/cpu/online, else the cpuN
//     lines of proc/stat, else runtime.NumCPU);
//   - affinity: Cpus_allowed_list of proc/self/status (else
//     runtime.NumCPU, which Go reads with sched_getaffinity at start-up);
//   - the cgroup: the process's cgroup in proc/self/cgroup, located through
//     proc/self/mountinfo, cgroup v1 (cpu.cfs_quota_us over
//     cpu.cfs_period_us) if the cpu controller is mounted there, else v2
//     (cpu.max); every directory from the process's cgroup up to the
//     mount's root is read, and the tightest quota wins.
func ReadBudget(fsys fs.FS) Budget {
	return readBudget(fsys, runtime.NumCPU)
}

func readBudget(fsys fs.FS, numCPU func() int) Budget {
	var b Budget
	b.Host = b.readHost(fsys, numCPU)
	b.Affinity = b.readAffinity(fsys, numCPU)
	b.CPUs, b.Limit = float64(b.Affinity), "affinity"
	b.readCgroup(fsys)
	if b.Quota > 0 && b.Quota < b.CPUs {
		b.CPUs, b.Limit = b.Quota, "cgroup quota"
	}
	return b
}

func (b *Budget) step(s Step) { b.Steps = append(b.Steps, s) }

// readHost returns the number of online CPUs.
func (b *Budget) readHost(fsys fs.FS, numCPU func() int) int {
	data, err := fs.ReadFile(fsys, fileOnline)
	if err == nil {
		v := strings.TrimSpace(string(data))
		n, perr := ParseCPUList(v)
		if perr == nil && n > 0 {
			b.step(Step{Source: "host", File: fileOnline, Value: v, CPUs: float64(n), Note: plural(n)})
			return n
		}
		err = perr
		if err == nil {
			err = errors.New("empty CPU list")
		}
		b.step(Step{Source: "host", File: fileOnline, Value: v, Err: err.Error(), Note: "next source"})
	} else {
		b.step(Step{Source: "host", File: fileOnline, Err: errText(err), Note: "next source"})
	}
	data, err = fs.ReadFile(fsys, fileProcStat)
	if err == nil {
		n := 0
		for line := range strings.Lines(string(data)) {
			if f, _, _ := strings.Cut(line, " "); len(f) > 3 && strings.HasPrefix(f, "cpu") && isDigits(f[3:]) {
				n++
			}
		}
		if n > 0 {
			b.step(Step{Source: "host", File: fileProcStat, Value: fmt.Sprintf("%d cpuN lines", n), CPUs: float64(n), Note: plural(n)})
			return n
		}
		err = errors.New("no cpuN lines")
	}
	b.step(Step{Source: "host", File: fileProcStat, Err: errText(err), Note: "next source"})
	n := max(numCPU(), 1)
	b.step(Step{Source: "host", Value: "runtime.NumCPU", CPUs: float64(n), Note: plural(n)})
	return n
}

// readAffinity returns the number of CPUs in the affinity mask.
func (b *Budget) readAffinity(fsys fs.FS, numCPU func() int) int {
	data, err := fs.ReadFile(fsys, fileStatus)
	if err == nil {
		v, ok := statusField(data, "Cpus_allowed_list")
		if !ok {
			err = errors.New("no Cpus_allowed_list field")
		} else {
			n, perr := ParseCPUList(v)
			switch {
			case perr != nil:
				err = perr
			case n == 0:
				err = errors.New("empty CPU list")
			case n > b.Host:
				err = fmt.Errorf("%d CPUs is more than the host's %d", n, b.Host)
			default:
				b.step(Step{Source: "affinity", File: fileStatus, Value: v, CPUs: float64(n), Note: plural(n)})
				return n
			}
		}
		b.step(Step{Source: "affinity", File: fileStatus, Value: v, Err: err.Error(), Note: "next source"})
	} else {
		b.step(Step{Source: "affinity", File: fileStatus, Err: errText(err), Note: "next source"})
	}
	n := min(max(numCPU(), 1), b.Host)
	b.step(Step{Source: "affinity", Value: "runtime.NumCPU", CPUs: float64(n), Note: plural(n)})
	return n
}

// statusField returns the value of a "Name:\tvalue" line of
// /proc/self/status.
func statusField(data []byte, name string) (string, bool) {
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && k == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// readCgroup reads the quotas of the process's cgroup and its ancestors,
// v1 first (where the cpu controller is mounted, it is not on v2), then
// v2, and sets b.Quota, b.QuotaDir and b.Cgroup.
func (b *Budget) readCgroup(fsys fs.FS) {
	cg, err := fs.ReadFile(fsys, fileCgroup)
	if err != nil {
		b.step(Step{Source: "cgroup", File: fileCgroup, Err: errText(err), Note: "no cgroup limit"})
		return
	}
	mi, err := fs.ReadFile(fsys, fileMountinfo)
	if err != nil {
		b.step(Step{Source: "cgroup", File: fileMountinfo, Err: errText(err), Note: "no cgroup limit"})
		return
	}
	groups, err := ParseCgroup(cg)
	if err != nil {
		b.step(Step{Source: "cgroup", File: fileCgroup, Err: err.Error(), Note: "no cgroup limit"})
		return
	}
	mounts, err := ParseMountinfo(mi)
	if err != nil {
		b.step(Step{Source: "cgroup", File: fileMountinfo, Err: err.Error(), Note: "no cgroup limit"})
		return
	}
	for _, version := range []string{"v1", "v2"} {
		dirs, why := cgroupDirs(version, groups, mounts)
		if why != "" {
			b.step(Step{Source: "cgroup " + version, Note: why})
			continue
		}
		if b.readQuotas(fsys, version, dirs) {
			b.Cgroup = version
			return
		}
	}
}

// cgroupDirs returns the directories, from the process's cgroup up to the
// mount's root, where the cgroup's cpu files are, or why there are none.
func cgroupDirs(version string, groups []Cgroup, mounts []Mount) ([]string, string) {
	var cgPath string
	found := false
	for _, g := range groups {
		if version == "v2" && g.ID == 0 && len(g.Controllers) == 0 {
			cgPath, found = g.Path, true
		}
		if version == "v1" && g.ID != 0 && containsController(g.Controllers, "cpu") {
			cgPath, found = g.Path, true
		}
	}
	if !found {
		if version == "v1" {
			return nil, "no v1 hierarchy with the cpu controller in " + fileCgroup
		}
		return nil, "no v2 hierarchy in " + fileCgroup
	}
	// The mount whose root is the longest prefix of the cgroup's path.
	var best *Mount
	for i := range mounts {
		m := &mounts[i]
		switch {
		case version == "v1" && (m.FSType != "cgroup" || !containsController(m.SuperOptions, "cpu")):
			continue
		case version == "v2" && m.FSType != "cgroup2":
			continue
		}
		if _, ok := relativeTo(cgPath, m.Root); !ok {
			continue
		}
		if best == nil || len(m.Root) > len(best.Root) {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Sprintf("no %s mount holds the cgroup %s in %s", version, cgPath, fileMountinfo)
	}
	rel, _ := relativeTo(cgPath, best.Root)
	top := strings.TrimPrefix(path.Clean(best.Point), "/")
	if top == "" {
		top = "."
	}
	dir := path.Join(top, rel)
	var dirs []string
	for {
		dirs = append(dirs, dir)
		if dir == top {
			return dirs, ""
		}
		dir = path.Dir(dir)
	}
}

// relativeTo returns p relative to root, both absolute cgroup paths, and
// whether p is inside root. Paths that climb ("/..", seen when a cgroup
// namespace hides the cgroup's ancestors) are not inside any root.
func relativeTo(p, root string) (string, bool) {
	if strings.Contains(p, "/..") || !strings.HasPrefix(p, "/") {
		return "", false
	}
	p, root = path.Clean(p), path.Clean(root)
	if root == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if p == root {
		return "", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return rest, true
	}
	return "", false
}

func containsController(list []string, c string) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// readQuotas reads the quota of each directory and keeps the tightest. It
// returns false if the process's own cgroup directory cannot be read at
// all (the hierarchy is not usable: try the next source).
func (b *Budget) readQuotas(fsys fs.FS, version string, dirs []string) bool {
	src := "cgroup " + version
	if _, err := fs.Stat(fsys, dirs[0]); err != nil {
		b.step(Step{Source: src, File: dirs[0], Err: errText(err), Note: "next source"})
		return false
	}
	for _, dir := range dirs {
		var (
			s    Step
			cpus float64
			err  error
		)
		if version == "v1" {
			s, cpus, err = readV1(fsys, dir, b.Host)
		} else {
			s, cpus, err = readV2(fsys, dir, b.Host)
		}
		s.Source = src
		switch {
		case err != nil:
			s.Err = err.Error()
			if s.Note == "" {
				s.Note = "level ignored"
			}
		case cpus == 0:
			if s.Note == "" {
				s.Note = "unlimited"
			}
		default:
			s.CPUs = cpus
			s.Note = plural(cpus)
			if b.Quota == 0 || cpus < b.Quota {
				b.Quota, b.QuotaDir = cpus, "/"+dir
			}
		}
		b.step(s)
	}
	b.step(Step{Source: src, Note: "the limits of ancestors above the mount's root, if any, are not visible from here"})
	return true
}

// readV1 reads cpu.cfs_quota_us and cpu.cfs_period_us in dir.
func readV1(fsys fs.FS, dir string, host int) (Step, float64, error) {
	qf, pf := path.Join(dir, "cpu.cfs_quota_us"), path.Join(dir, "cpu.cfs_period_us")
	s, q, ok, err := readLimit(fsys, qf, "no quota file: no limit at this level")
	if !ok {
		return s, 0, err
	}
	p, err := fs.ReadFile(fsys, pf)
	if err != nil {
		s.File += ", " + pf
		return s, 0, errors.New(errText(err))
	}
	s.File += ", " + pf
	s.Value += " / " + strings.TrimSpace(string(p))
	cpus, err := ParseCFS(q, string(p), host)
	return s, cpus, err
}

// readV2 reads cpu.max in dir.
func readV2(fsys fs.FS, dir string, host int) (Step, float64, error) {
	s, data, ok, err := readLimit(fsys, path.Join(dir, "cpu.max"), "no cpu.max: no limit at this level")
	if !ok {
		return s, 0, err
	}
	cpus, err := ParseCPUMax(data, host)
	return s, cpus, err
}

// readLimit reads the limit file f of one level: its step, with the
// file's text as its Value, and its contents. It reports false when there
// is no such file (the step's note then says missing) or when it cannot
// read it (with the error).
func readLimit(fsys fs.FS, f, missing string) (s Step, data string, ok bool, err error) {
	s = Step{File: f}
	b, err := fs.ReadFile(fsys, f)
	if errors.Is(err, fs.ErrNotExist) {
		s.Note = missing
		return s, "", false, nil
	}
	if err != nil {
		return s, "", false, errors.New(errText(err))
	}
	s.Value = strings.TrimSpace(string(b))
	return s, string(b), true, nil
}

// The kernel's bounds on a CFS period and quota (kernel/sched/core.c):
// a period of 1 ms to 1 s, a quota of at least 1 ms.
const (
	minPeriodUS = 1000
	maxPeriodUS = 1000000
	minQuotaUS  = 1000
)

// ErrAbsurd is wrapped by the errors of the quota parsers for values no
// kernel would hold: a quota of zero or below, a period out of the
// kernel's range, a quota larger than the host.
var ErrAbsurd = errors.New("cpu: absurd value")

// ParseCPUMax parses the content of a cgroup v2 cpu.max file, "$MAX
// $PERIOD", and returns the CPUs it allows, or 0 for "max" (no limit).
// host is the number of CPUs of the host: a quota larger than it is
// absurd. A malformed content is an error; so is an absurd value (one
// wrapping [ErrAbsurd]).
func ParseCPUMax(s string, host int) (float64, error) {
	s = strings.TrimSpace(s)
	f := strings.Fields(s)
	if len(f) < 1 || len(f) > 2 {
		return 0, fmt.Errorf("cpu: cpu.max %q: want \"$MAX $PERIOD\"", s)
	}
	period := "100000" // the kernel's default when only $MAX is written
	if len(f) == 2 {
		period = f[1]
	}
	p, err := parsePeriod(period)
	if err != nil {
		return 0, fmt.Errorf("cpu: cpu.max %q: %w", s, err)
	}
	if f[0] == "max" {
		return 0, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu: cpu.max %q: quota is not a number or \"max\"", s)
	}
	return quotaCPUs(q, p, host)
}

// ParseCFS parses the contents of cgroup v1 cpu.cfs_quota_us and
// cpu.cfs_period_us and returns the CPUs they allow, or 0 for a quota of
// -1 (no limit). Errors as [ParseCPUMax].
func ParseCFS(quota, period string, host int) (float64, error) {
	p, err := parsePeriod(strings.TrimSpace(period))
	if err != nil {
		return 0, fmt.Errorf("cpu: cpu.cfs_period_us: %w", err)
	}
	q, err := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu: cpu.cfs_quota_us %q is not a number", strings.TrimSpace(quota))
	}
	if q == -1 {
		return 0, nil
	}
	return quotaCPUs(q, p, host)
}

func parsePeriod(s string) (int64, error) {
	p, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("period %q is not a number", s)
	case p < minPeriodUS || p > maxPeriodUS:
		return 0, fmt.Errorf("%w: period of %d µs is outside the kernel's 1 ms to 1 s", ErrAbsurd, p)
	}
	return p, nil
}

func quotaCPUs(q, p int64, host int) (float64, error) {
	switch {
	case q <= 0:
		return 0, fmt.Errorf("%w: quota of %d µs (zero or negative, and not the \"no limit\" value)", ErrAbsurd, q)
	case q < minQuotaUS:
		return 0, fmt.Errorf("%w: quota of %d µs is below the kernel's 1 ms minimum", ErrAbsurd, q)
	}
	cpus := float64(q) / float64(p)
	if host > 0 && cpus > float64(host) {
		return 0, fmt.Errorf("%w: quota of %s CPUs (%d/%d µs) is larger than the host's %d", ErrAbsurd, FormatCPUs(cpus), q, p, host)
	}
	return cpus, nil
}

// ParseCPUList parses a kernel CPU list ("0-3,8,10-11") and returns the
// number of CPUs in it.
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("cpu: CPU list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu: CPU list %q: bad range %q", s, part)
			}
		}
		if b-a >= 1<<16 || n+(b-a+1) > 1<<16 {
			return 0, fmt.Errorf("cpu: CPU list %q: more than 65536 CPUs", s)
		}
		n += b - a + 1
	}
	return n, nil
}

// Cgroup is one line of /proc/self/cgroup: hierarchy ID, controllers
// (empty for v2's hierarchy 0) and the cgroup's path in the hierarchy.
type Cgroup struct {
	ID          int
	Controllers []string
	Path        string
}

// ParseCgroup parses /proc/self/cgroup.
func ParseCgroup(data []byte) ([]Cgroup, error) {
	var out []Cgroup
	for i, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		f := strings.SplitN(string(line), ":", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("cpu: %s line %d %q: want ID:CONTROLLERS:PATH", fileCgroup, i+1, line)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("cpu: %s line %d: bad hierarchy ID %q", fileCgroup, i+1, f[0])
		}
		var ctls []string
		if f[1] != "" {
			ctls = strings.Split(f[1], ",")
		}
		out = append(out, Cgroup{ID: id, Controllers: ctls, Path: f[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cpu: %s is empty", fileCgroup)
	}
	return out, nil
}

// Mount is the part of a line of /proc/self/mountinfo that locates a
// cgroup hierarchy.
type Mount struct {
	// Root is the directory of the file system mounted (for a cgroup
	// file system, a cgroup path); Point is where it is mounted.
	Root, Point string
	FSType      string
	// SuperOptions are the per-superblock options: a v1 cgroup mount's
	// controllers are among them.
	SuperOptions []string
}

// ParseMountinfo parses /proc/self/mountinfo (proc(5)). Lines that are
// not mount lines are an error; octal escapes (\040 for a space) in paths
// are decoded.
func ParseMountinfo(data []byte) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 7 || sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("cpu: %s line %d: not a mount line", fileMountinfo, n)
		}
		m := Mount{Root: unescapeOctal(f[3]), Point: unescapeOctal(f[4]), FSType: f[sep+1]}
		if len(f) > sep+3 {
			m.SuperOptions = strings.Split(f[sep+3], ",")
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", fileMountinfo, err)
	}
	return out, nil
}

// unescapeOctal decodes the \ooo escapes the kernel writes for space, tab,
// newline and backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return s[0] <= '3'
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func plural[T int | float64](n T) string {
	if n == 1 {
		return "1 CPU"
	}
	return FormatCPUs(float64(n)) + " CPUs"
}

// errText describes a file error without repeating the path, which the
// step records itself.
func errText(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case errors.Is(err, fs.ErrPermission):
		return "unreadable: permission denied"
	case errors.As(err, &pe):
		return "unreadable: " + pe.Err.Error()
	}
	return err.Error()
}

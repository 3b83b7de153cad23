package cpu

import (
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

package cpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

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

package cpu

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// four is the runtime.NumCPU of the tests' fake machines.
func four() int { return 4 }

// summary is the part of a Budget the table compares; the steps are
// checked by wantSteps.
type summary struct {
	CPUs     float64
	Host     int
	Affinity int
	Quota    float64
	QuotaDir string
	Cgroup   string
	Limit    string
}

func summarize(b Budget) summary {
	return summary{b.CPUs, b.Host, b.Affinity, b.Quota, b.QuotaDir, b.Cgroup, b.Limit}
}

func TestReadBudgetTrees(t *testing.T) {
	tests := []struct {
		name string
		want summary
		// wantSteps are substrings of "source|file|value|note|error" lines
		// that must appear, in order, among the steps.
		wantSteps []string
	}{
		{
			name: "v2",
			want: summary{CPUs: 1.5, Host: 4, Affinity: 4, Quota: 1.5, QuotaDir: "/sys/fs/cgroup/app", Cgroup: "v2", Limit: "cgroup quota"},
			wantSteps: []string{
				"cgroup v2|sys/fs/cgroup/app/web/cpu.max|max 100000|unlimited|",
				"cgroup v2|sys/fs/cgroup/app/cpu.max|150000 100000|1.5 CPUs|",
				"cgroup v2|sys/fs/cgroup/cpu.max||no cpu.max: no limit at this level|",
			},
		},
		{
			name: "v1",
			want: summary{CPUs: 0.5, Host: 8, Affinity: 8, Quota: 0.5, QuotaDir: "/sys/fs/cgroup/cpu,cpuacct/docker/abc", Cgroup: "v1", Limit: "cgroup quota"},
			wantSteps: []string{
				"cgroup v1|sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us, sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us|50000 / 100000|0.5 CPUs|",
				"cgroup v1|sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us",
				"|-1 / 100000|unlimited|",
			},
		},
		{
			name: "hybrid",
			// The quota (3) is above the affinity mask (2): the mask wins.
			want:      summary{CPUs: 2, Host: 4, Affinity: 2, Quota: 3, QuotaDir: "/sys/fs/cgroup/cpu,cpuacct/system.slice/db.service", Cgroup: "v1", Limit: "affinity"},
			wantSteps: []string{"affinity|proc/self/status|0-1|2 CPUs|", "|300000 / 100000|3 CPUs|", "cgroup v1|", "|-1 / 100000|unlimited|"},
		},
		{
			name: "nested",
			// The pod (62.5 ms per 50 ms: 1.25) is tighter than the
			// container (3); the mount's root is the pod.
			want:      summary{CPUs: 1.25, Host: 16, Affinity: 16, Quota: 1.25, QuotaDir: "/sys/fs/cgroup", Cgroup: "v2", Limit: "cgroup quota"},
			wantSteps: []string{"sys/fs/cgroup/c1/cpu.max|300000 100000|3 CPUs|", "sys/fs/cgroup/cpu.max|62500 50000|1.25 CPUs|"},
		},
		{
			name:      "unlimited",
			want:      summary{CPUs: 3, Host: 8, Affinity: 3, Cgroup: "v2", Limit: "affinity"},
			wantSteps: []string{"affinity|proc/self/status|0-1,3|3 CPUs|", "user.slice/cpu.max|max|unlimited|"},
		},
		{
			name: "malformed",
			// No online file: the host is counted from proc/stat. The
			// affinity list is a reversed range: runtime.NumCPU. Every
			// quota is rejected, each for its own reason.
			want: summary{CPUs: 4, Host: 4, Affinity: 4, Cgroup: "v2", Limit: "affinity"},
			wantSteps: []string{
				"host|sys/devices/system/cpu/online||next source|missing",
				"host|proc/stat|4 cpuN lines|4 CPUs|",
				"affinity|proc/self/status|3-1|next source|cpu: CPU list \"3-1\": bad range",
				"affinity||runtime.NumCPU|4 CPUs|",
				"a/b/c/d/cpu.max|abc 100000|level ignored|cpu: cpu.max \"abc 100000\": quota is not a number",
				"a/b/c/cpu.max|0 100000|level ignored|cpu: absurd value: quota of 0 µs",
				"a/b/cpu.max|900000 100000|level ignored|cpu: absurd value: quota of 9 CPUs (900000/100000 µs) is larger than the host's 4",
				"a/cpu.max|-5 100000|level ignored|cpu: absurd value: quota of -5 µs",
				"sys/fs/cgroup/cpu.max|50000 0|level ignored|cpu: cpu.max \"50000 0\": cpu: absurd value: period of 0 µs",
			},
		},
		{
			name: "fallback",
			// v1's cpu controller is listed but not mounted: v2 is read,
			// at a mount point with an escaped space.
			want: summary{CPUs: 2, Host: 4, Affinity: 4, Quota: 2, QuotaDir: "/sys/fs/cgroup v2/svc", Cgroup: "v2", Limit: "cgroup quota"},
			wantSteps: []string{
				"cgroup v1|||no v1 mount holds the cgroup /svc",
				"cgroup v2|sys/fs/cgroup v2/svc/cpu.max|200000 100000|2 CPUs|",
			},
		},
		{
			name: "namespaced",
			want: summary{CPUs: 4, Host: 4, Affinity: 4, Limit: "affinity"},
			wantSteps: []string{
				"cgroup v1|||no v1 hierarchy with the cpu controller",
				"cgroup v2|||no v2 mount holds the cgroup /../../sibling",
			},
		},
		{
			name: "empty",
			want: summary{CPUs: 4, Host: 4, Affinity: 4, Limit: "affinity"},
			wantSteps: []string{
				"host|sys/devices/system/cpu/online||next source|missing",
				"host|proc/stat||next source|missing",
				"host||runtime.NumCPU|4 CPUs|",
				"affinity|proc/self/status||next source|missing",
				"cgroup|proc/self/cgroup||no cgroup limit|missing",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := readBudget(os.DirFS("testdata/"+tt.name), four)
			if diff := cmp.Diff(tt.want, summarize(b)); diff != "" {
				t.Errorf("budget mismatch (-want +got):\n%s\nsteps:\n%s", diff, stepLines(b))
			}
			wantSteps(t, b, tt.wantSteps)
		})
	}
}

func stepLines(b Budget) string {
	var lines []string
	for _, s := range b.Steps {
		lines = append(lines, strings.Join([]string{s.Source, s.File, s.Value, s.Note, s.Err}, "|"))
	}
	return strings.Join(lines, "\n")
}

// wantSteps checks that each of want is a substring of a step line, in
// order.
func wantSteps(t *testing.T, b Budget, want []string) {
	t.Helper()
	lines := strings.Split(stepLines(b), "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && !strings.Contains(lines[i], w) {
			i++
		}
		if i == len(lines) {
			t.Errorf("no step %q (in order) among:\n%s", w, stepLines(b))
			return
		}
		i++
	}
}

// denyFS refuses to open the files named, as a file system where they
// are not readable would.
type denyFS struct {
	fs.FS
	deny map[string]bool
}

func (d denyFS) Open(name string) (fs.File, error) {
	if d.deny[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

func TestReadBudgetUnreadable(t *testing.T) {
	fsys := denyFS{os.DirFS("testdata/v2"), map[string]bool{
		"sys/fs/cgroup/app/cpu.max": true,
		"proc/self/status":          true,
	}}
	b := readBudget(fsys, four)
	// The app's quota cannot be read: that level is ignored, the others
	// are read, and the budget is the affinity fallback.
	if diff := cmp.Diff(summary{CPUs: 4, Host: 4, Affinity: 4, Cgroup: "v2", Limit: "affinity"}, summarize(b)); diff != "" {
		t.Errorf("budget mismatch (-want +got):\n%s\n%s", diff, stepLines(b))
	}
	wantSteps(t, b, []string{
		"affinity|proc/self/status||next source|unreadable: permission denied",
		"cgroup v2|sys/fs/cgroup/app/cpu.max||level ignored|unreadable: permission denied",
	})
}

func TestReadBudgetLeafMissing(t *testing.T) {
	// The cgroup named in /proc/self/cgroup has no directory: the source
	// is skipped with the reason, and nothing limits.
	fsys := fstest.MapFS{
		"proc/self/cgroup":              {Data: []byte("0::/gone\n")},
		"proc/self/mountinfo":           {Data: []byte("24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/devices/system/cpu/online": {Data: []byte("0-1\n")},
		"sys/fs/cgroup/cpu.max":         {Data: []byte("100000 100000\n")},
	}
	b := readBudget(fsys, four)
	if diff := cmp.Diff(summary{CPUs: 2, Host: 2, Affinity: 2, Limit: "affinity"}, summarize(b)); diff != "" {
		t.Errorf("budget mismatch (-want +got):\n%s\n%s", diff, stepLines(b))
	}
	wantSteps(t, b, []string{"cgroup v2|sys/fs/cgroup/gone||next source|missing"})
}

func TestReadBudgetSelf(t *testing.T) {
	// The real machine: whatever it is, the budget is positive and no
	// larger than the host.
	b := ReadBudget(os.DirFS("/"))
	if b.CPUs <= 0 || b.CPUs > float64(b.Host) || b.Limit == "" {
		t.Errorf("ReadBudget(/) = %+v", b)
	}
}

func TestRelativeTo(t *testing.T) {
	for _, tt := range []struct {
		p, root, want string
		ok            bool
	}{
		{"/a/b", "/", "a/b", true},
		{"/", "/", "", true},
		{"/a/b", "/a", "b", true},
		{"/a", "/a", "", true},
		{"/ab", "/a", "", false},
		{"/../x", "/", "", false},
		{"relative", "/", "", false},
	} {
		got, ok := relativeTo(tt.p, tt.root)
		if got != tt.want || ok != tt.ok {
			t.Errorf("relativeTo(%q, %q) = %q, %v; want %q, %v", tt.p, tt.root, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzReadBudget(f *testing.F) {
	f.Add("0::/a\n", "24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "50000 100000", "Cpus_allowed_list:\t0-1\n")
	f.Add("4:cpu:/a\n", "33 30 0:30 / /c rw - cgroup cgroup rw,cpu\n", "x", "")
	f.Fuzz(func(t *testing.T, cgroup, mountinfo, cpumax, status string) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":              {Data: []byte(cgroup)},
			"proc/self/mountinfo":           {Data: []byte(mountinfo)},
			"proc/self/status":              {Data: []byte(status)},
			"sys/devices/system/cpu/online": {Data: []byte("0-3")},
			"sys/fs/cgroup/a/cpu.max":       {Data: []byte(cpumax)},
			"sys/fs/cgroup/cpu.max":         {Data: []byte(cpumax)},
			"c/a/cpu.cfs_quota_us":          {Data: []byte(cpumax)},
			"c/a/cpu.cfs_period_us":         {Data: []byte("100000")},
		}
		b := readBudget(fsys, four)
		if !(b.CPUs > 0) || b.CPUs > 4 {
			t.Errorf("budget %v out of (0, 4]:\n%s", b.CPUs, stepLines(b))
		}
	})
}

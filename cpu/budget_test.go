package cpu

import (
	"errors"
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

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in      string
		host    int
		want    float64
		wantErr string
		absurd  bool
	}{
		{in: "max 100000", host: 4, want: 0},
		{in: "max", host: 4, want: 0},
		{in: "150000 100000\n", host: 4, want: 1.5},
		{in: "200000", host: 4, want: 2},
		{in: "400000 100000", host: 4, want: 4},
		{in: "400001 100000", host: 4, wantErr: "larger than the host's 4", absurd: true},
		{in: "0 100000", host: 4, wantErr: "quota of 0 µs", absurd: true},
		{in: "-1 100000", host: 4, wantErr: "quota of -1 µs", absurd: true},
		{in: "999 100000", host: 4, wantErr: "below the kernel's 1 ms", absurd: true},
		{in: "100000 999", host: 4, wantErr: "period of 999 µs", absurd: true},
		{in: "100000 1000001", host: 4, wantErr: "period of 1000001 µs", absurd: true},
		{in: "100000 -100000", host: 4, wantErr: "period of -100000 µs", absurd: true},
		{in: "", host: 4, wantErr: "want \"$MAX $PERIOD\""},
		{in: "1 2 3", host: 4, wantErr: "want \"$MAX $PERIOD\""},
		{in: "1.5 100000", host: 4, wantErr: "quota is not a number"},
		{in: "max abc", host: 4, wantErr: "period \"abc\" is not a number"},
		{in: "99999999999999999999 100000", host: 4, wantErr: "quota is not a number"},
	}
	for _, tt := range tests {
		got, err := ParseCPUMax(tt.in, tt.host)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCPUMax(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			if errors.Is(err, ErrAbsurd) != tt.absurd {
				t.Errorf("ParseCPUMax(%q): errors.Is(err, ErrAbsurd) = %v", tt.in, !tt.absurd)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseCPUMax(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseCFS(t *testing.T) {
	tests := []struct {
		quota, period string
		want          float64
		wantErr       string
	}{
		{"-1\n", "100000\n", 0, ""},
		{"50000", "100000", 0.5, ""},
		{"250000", "50000", 5, "larger than the host's 4"},
		{"0", "100000", 0, "quota of 0 µs"},
		{"-2", "100000", 0, "quota of -2 µs"},
		{"x", "100000", 0, "cpu.cfs_quota_us \"x\" is not a number"},
		{"50000", "", 0, "period \"\" is not a number"},
		{"50000", "0", 0, "period of 0 µs"},
	}
	for _, tt := range tests {
		got, err := ParseCFS(tt.quota, tt.period, 4)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCFS(%q, %q) = %v, %v; want error containing %q", tt.quota, tt.period, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseCFS(%q, %q) = %v, %v; want %v", tt.quota, tt.period, got, err, tt.want)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"0", 1, false},
		{"0-3", 4, false},
		{"0-1,3,8-11\n", 7, false},
		{"3-1", 0, true},
		{"a", 0, true},
		{"-1", 0, true},
		{"0-", 0, true},
		{"0,,1", 0, true},
		{"0-99999999", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseCPUList(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseCgroup(t *testing.T) {
	got, err := ParseCgroup([]byte("4:cpu,cpuacct:/a:b\n0::/\n"))
	want := []Cgroup{{ID: 4, Controllers: []string{"cpu", "cpuacct"}, Path: "/a:b"}, {ID: 0, Path: "/"}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseCgroup mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "\n", "no colons", "x::/", "-1::/"} {
		if _, err := ParseCgroup([]byte(bad)); err == nil {
			t.Errorf("ParseCgroup(%q) succeeded", bad)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n" +
		"25 1 0:23 / /x rw - tmpfs tmpfs\n"
	got, err := ParseMountinfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/mnt1", Point: "/mnt two", FSType: "ext3", SuperOptions: []string{"rw", "errors=continue"}},
		{Root: "/", Point: "/sys/fs/cgroup", FSType: "cgroup2", SuperOptions: []string{"rw", "nsdelegate"}},
		{Root: "/", Point: "/x", FSType: "tmpfs"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseMountinfo mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"1 2 3", "1 2 3 4 5 6 7 8", "1 2 3 4 5 6 - x"} {
		if _, err := ParseMountinfo([]byte(bad)); err == nil {
			t.Errorf("ParseMountinfo(%q) succeeded", bad)
		}
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:  "/a b",
		`/a\011b`:  "/a\tb",
		`/a\134b`:  `/a\b`,
		`/a\04`:    `/a\04`,
		`/a\999`:   `/a\999`,
		`/trail\`:  `/trail\`,
		`/plain`:   "/plain",
		`\040\040`: "  ",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
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

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "150000 100000", "0 0", "-1", "1 2 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUMax(s, 64)
		if err == nil && (cpus < 0 || cpus > 64) {
			t.Errorf("ParseCPUMax(%q) = %v without error", s, cpus)
		}
	})
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

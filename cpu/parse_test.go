package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

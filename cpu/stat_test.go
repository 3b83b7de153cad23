package cpu

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// statLine builds a /proc/[pid]/stat line with the command name comm and
// the given utime and stime.
func statLine(comm string, utime, stime int) string {
	// pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime ...
	return "4242 (" + comm + ") R 1 4242 4242 0 -1 4194304 97 0 0 0 " +
		strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " 7 8 20 0 1 0 21859 3133440 381 18446744073709551615 0 0 0\n"
}

func TestParseSelfStat(t *testing.T) {
	for _, comm := range []string{
		"cat",
		"my server",
		"a) R 1 2 3 (b",          // parentheses and fields inside the name
		") ) )",                  // only closing parentheses
		"x 1 2 3 4 5 6 7 8 9 10", // numbers inside the name
		"",
	} {
		got, err := ParseSelfStat([]byte(statLine(comm, 1234, 56)))
		if err != nil || got != 1290 {
			t.Errorf("ParseSelfStat(comm %q) = %d, %v; want 1290", comm, got, err)
		}
	}
	for _, bad := range []string{
		"",
		"4242 cat R 1",
		"4242 (cat) R 1 2 3",
		"4242 (cat) R 1 4242 4242 0 -1 4194304 97 0 0 0 x 56",
		"4242 (cat) R 1 4242 4242 0 -1 4194304 97 0 0 0 -5 56",
	} {
		if got, err := ParseSelfStat([]byte(bad)); err == nil {
			t.Errorf("ParseSelfStat(%q) = %d, want an error", bad, got)
		}
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"cpu  5166 1 4248 33539 465 7 222 9 100 100\ncpu0 1 2 3 4\n", 5166 + 1 + 4248 + 7 + 222, false},
		{"cpu  10 0 10 100\n", 20, false}, // an old kernel: four fields
		{"cpu  10 0 10 100", 20, false},   // no newline
		{"cpu0 10 0 10 100\n", 0, true},
		{"cpu 10 0 x 100\n", 0, true},
		{"cpu 10\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseStat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseStat(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseStatTimes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want StatTimes
	}{
		{"cpu  5166 1 4248 33539 465 7 222 9 100 100\n", StatTimes{Busy: 5166 + 1 + 4248 + 7 + 222, Total: 5166 + 1 + 4248 + 33539 + 465 + 7 + 222 + 9, Steal: 9}},
		{"cpu  10 0 10 100\n", StatTimes{Busy: 20, Total: 120}},
	} {
		got, err := ParseStatTimes([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("ParseStatTimes(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseStatTimes([]byte("cpu 1 x 3 4\n")); err == nil {
		t.Error("ParseStatTimes accepted a field that is not a counter")
	}
}

// auxv encodes an auxiliary vector of (type, value) pairs.
func auxv(word int, bo binary.AppendByteOrder, pairs ...uint64) []byte {
	var b []byte
	for _, v := range pairs {
		if word == 4 {
			b = bo.AppendUint32(b, uint32(v))
		} else {
			b = bo.AppendUint64(b, v)
		}
	}
	return b
}

func TestParseAuxvClockTick(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		word int
		bo   interface {
			binary.ByteOrder
			binary.AppendByteOrder
		}
		want    int
		wantErr string
	}{
		{"64-bit little endian", auxv(8, binary.LittleEndian, 33, 7, 6, 4096, 17, 100, 0, 0), 8, binary.LittleEndian, 100, ""},
		{"32-bit big endian", auxv(4, binary.BigEndian, 6, 4096, 17, 1024, 0, 0), 4, binary.BigEndian, 1024, ""},
		{"250 Hz", auxv(8, binary.LittleEndian, 17, 250), 8, binary.LittleEndian, 250, ""},
		{"missing", auxv(8, binary.LittleEndian, 6, 4096, 0, 0, 17, 100), 8, binary.LittleEndian, 0, "no AT_CLKTCK"},
		{"truncated", auxv(8, binary.LittleEndian, 6, 4096)[:12], 8, binary.LittleEndian, 0, "no AT_CLKTCK"},
		{"zero", auxv(8, binary.LittleEndian, 17, 0), 8, binary.LittleEndian, 0, "absurd"},
		{"huge", auxv(8, binary.LittleEndian, 17, 1<<40), 8, binary.LittleEndian, 0, "absurd"},
		{"bad word", nil, 3, binary.LittleEndian, 0, "word of 3"},
	}
	for _, tt := range tests {
		got, err := ParseAuxvClockTick(tt.data, tt.word, tt.bo)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %d, %v; want error %q", tt.name, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %d, %v; want %d", tt.name, got, err, tt.want)
		}
	}
}

func TestReadClockTickSelf(t *testing.T) {
	// On Linux the kernel always provides AT_CLKTCK.
	if _, err := os.Stat("/proc/self/auxv"); err != nil {
		t.Skip("no /proc/self/auxv")
	}
	hz, err := ReadClockTick("/")
	if err != nil || hz < 1 {
		t.Fatalf("ReadClockTick(/) = %d, %v", hz, err)
	}
}

// fakeProc writes a /proc with the given self stat, stat and clock tick
// under a temporary root.
func fakeProc(t *testing.T, self, stat string, hz uint64) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "proc", "self")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "stat"), []byte(self))
	write(filepath.Join(root, "proc", "stat"), []byte(stat))
	write(filepath.Join(dir, "auxv"), auxv(strconv.IntSize/8, binary.NativeEndian, 17, hz, 0, 0))
	return root
}

func TestProcReader(t *testing.T) {
	root := fakeProc(t, statLine("srv (2)", 30, 20), "cpu  100 0 50 1000 0 0 0 7 0 0\n", 250)
	r, err := NewProcReader(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	// 250 Hz: a tick is 4 ms.
	// Total: user, nice, system, idle, iowait, irq, softirq and steal.
	if want := (Sample{Self: 50 * 4 * time.Millisecond, Busy: 150 * 4 * time.Millisecond, Total: 1157 * 4 * time.Millisecond, Steal: 7 * 4 * time.Millisecond}); s != want {
		t.Errorf("Read = %+v, want %+v", s, want)
	}
	// The files are re-read from the start at each Read.
	os.WriteFile(filepath.Join(root, "proc", "stat"), []byte("cpu  200 0 50 1000 0 0 0 0 0 0\n"), 0o644)
	if s, err = r.Read(); err != nil || s.Busy != 250*4*time.Millisecond {
		t.Errorf("second Read = %+v, %v", s, err)
	}
	// A malformed file is an error, not a crash.
	os.WriteFile(filepath.Join(root, "proc", "stat"), []byte("garbage"), 0o644)
	if _, err = r.Read(); err == nil {
		t.Error("Read of a malformed /proc/stat succeeded")
	}
}

func TestNewProcReaderErrors(t *testing.T) {
	if _, err := NewProcReader(t.TempDir()); err == nil {
		t.Error("NewProcReader of an empty root succeeded")
	}
	root := fakeProc(t, "garbage", "cpu 1 2 3 4\n", 100)
	if _, err := NewProcReader(root); err == nil {
		t.Error("NewProcReader with a malformed /proc/self/stat succeeded")
	}
}

func TestProcReaderSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	r, err := NewProcReader("/")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Read()
	if err != nil || s.Busy <= 0 || s.Self < 0 {
		t.Errorf("Read = %+v, %v", s, err)
	}
}

func FuzzParseSelfStat(f *testing.F) {
	f.Add([]byte(statLine("a) b (c", 1, 2)))
	f.Add([]byte("1 (x) R"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseSelfStat(data) // must not panic
	})
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("cpu  5166 0 4248 33539 465 0 222 0 0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseStat(data)
	})
}

func FuzzParseAuxvClockTick(f *testing.F) {
	f.Add(auxv(8, binary.LittleEndian, 17, 100, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		hz, err := ParseAuxvClockTick(data, 8, binary.LittleEndian)
		if err == nil && (hz < 1 || hz > 1000000) {
			t.Errorf("hz %d without error", hz)
		}
	})
}

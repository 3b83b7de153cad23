package cpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Sample is one reading of the CPU time counters the pool's loop compares
// from tick to tick. Both are cumulative (since the process's and the
// host's start), in the same unit, so only their differences matter.
type Sample struct {
	// Self is the CPU time this process has used, user and system.
	Self time.Duration
	// Busy is the busy time of all the host's CPUs: every CPU's time
	// minus its idle, I/O-wait and stolen time.
	Busy time.Duration
	// Total is the time of all the host's CPUs, busy or not (busy, idle,
	// I/O wait and stolen): the host's CPUs times the time elapsed, in
	// the unit and with the rounding of Busy, so that Busy/Total is the
	// fraction of the host that was busy. 0 if the reader does not know
	// it; the pool then cannot tell what the neighbours use and keeps
	// its active count.
	Total time.Duration
	// Steal is the time the hypervisor ran other machines while the
	// host's CPUs wanted to run (part of Total, not of Busy).
	Steal time.Duration
}

// Reader reads the counters of a [Sample]. The pool's loop calls Read
// once per tick, from one goroutine. Tests give the pool a scripted
// Reader; [NewProcReader] reads the real counters.
type Reader interface {
	Read() (Sample, error)
}

// ProcReader reads a [Sample] from /proc/self/stat and /proc/stat. It
// keeps both files open and re-reads them from the start at each Read, so
// a Read is two pread system calls and two small parses, without
// allocating.
type ProcReader struct {
	self, stat *os.File
	buf        []byte
	tick       time.Duration // one clock tick, the unit of both files
}

// NewProcReader opens proc/self/stat and proc/stat under root ("/" for
// the real ones) and reads the clock tick from proc/self/auxv. It fails if
// a file cannot be opened or the clock tick cannot be read.
func NewProcReader(root string) (*ProcReader, error) {
	hz, err := ReadClockTick(root)
	if err != nil {
		return nil, err
	}
	self, err := os.Open(filepath.Join(root, "proc", "self", "stat"))
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	stat, err := os.Open(filepath.Join(root, "proc", "stat"))
	if err != nil {
		self.Close()
		return nil, fmt.Errorf("cpu: %w", err)
	}
	r := &ProcReader{self: self, stat: stat, buf: make([]byte, 4096), tick: time.Second / time.Duration(hz)}
	if _, err := r.Read(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Read reads both counters. It is not safe for concurrent use.
func (r *ProcReader) Read() (Sample, error) {
	n, err := r.readAll(r.self)
	if err != nil {
		return Sample{}, err
	}
	self, err := ParseSelfStat(r.buf[:n])
	if err != nil {
		return Sample{}, err
	}
	n, err = r.readAll(r.stat)
	if err != nil {
		return Sample{}, err
	}
	t, err := ParseStatTimes(r.buf[:n])
	if err != nil {
		return Sample{}, err
	}
	return Sample{Self: time.Duration(self) * r.tick, Busy: time.Duration(t.Busy) * r.tick,
		Total: time.Duration(t.Total) * r.tick, Steal: time.Duration(t.Steal) * r.tick}, nil
}

// readAll reads f from its start into r.buf, growing it as needed, and
// returns the length read. /proc/stat can be long (a line per CPU and one
// per interrupt), but only its first line is parsed: reading the first
// buffer-full is enough.
func (r *ProcReader) readAll(f *os.File) (int, error) {
	n, err := f.ReadAt(r.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("cpu: reading %s: %w", f.Name(), err)
	}
	return n, nil
}

// Close closes the files.
func (r *ProcReader) Close() error {
	return errors.Join(r.self.Close(), r.stat.Close())
}

// ParseSelfStat parses /proc/[pid]/stat and returns the process's user
// plus system time, in clock ticks. The command name (the second field) is
// in parentheses and may itself hold spaces and parentheses: the fields
// after it are found from the last ')' of the line.
func ParseSelfStat(data []byte) (uint64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || bytes.IndexByte(data, '(') < 0 {
		return 0, errors.New("cpu: /proc/self/stat: no command name in parentheses")
	}
	// After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime(14) stime(15).
	rest := data[i+1:]
	var f []byte
	for range 12 {
		if f, rest = nextField(rest); f == nil {
			return 0, errors.New("cpu: /proc/self/stat: fewer than 13 fields after the command name")
		}
	}
	utime := f
	stime, _ := nextField(rest)
	if stime == nil {
		return 0, errors.New("cpu: /proc/self/stat: fewer than 13 fields after the command name")
	}
	u, ok1 := parseCounter(utime)
	s, ok2 := parseCounter(stime)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("cpu: /proc/self/stat: utime %q and stime %q are not counters", utime, stime)
	}
	return u + s, nil
}

// ParseStat parses the first line of /proc/stat ("cpu user nice system
// idle iowait irq softirq steal guest guest_nice") and returns the busy
// time of all CPUs in clock ticks: user + nice + system + irq + softirq.
// Idle and I/O wait are not busy; steal is time the hypervisor gave to
// another machine, not to anyone here; guest time is already counted in
// user.
func ParseStat(data []byte) (uint64, error) {
	t, err := ParseStatTimes(data)
	return t.Busy, err
}

// StatTimes are the host's CPU times of the first line of /proc/stat, in
// clock ticks.
type StatTimes struct {
	// Busy is user + nice + system + irq + softirq (as [ParseStat]);
	// Total adds idle, I/O wait and steal; Steal is the steal field
	// alone (0 on kernels too old to have it).
	Busy, Total, Steal uint64
}

// ParseStatTimes parses the first line of /proc/stat like [ParseStat]
// and returns the busy, total and stolen times of all CPUs.
func ParseStatTimes(data []byte) (StatTimes, error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	name, rest := nextField(line)
	if string(name) != "cpu" {
		return StatTimes{}, errors.New(`cpu: /proc/stat: the first line is not "cpu user nice system idle ..."`)
	}
	var t StatTimes
	n := 0
	for f, rest := nextField(rest); f != nil; f, rest = nextField(rest) {
		v, ok := parseCounter(f)
		if !ok {
			return StatTimes{}, fmt.Errorf("cpu: /proc/stat: field %d %q is not a counter", n+1, f)
		}
		switch n {
		case 0, 1, 2, 5, 6: // user, nice, system, irq, softirq
			t.Busy += v
			t.Total += v
		case 3, 4: // idle, iowait
			t.Total += v
		case 7: // steal
			t.Steal = v
			t.Total += v
		}
		n++
	}
	if n < 4 {
		return StatTimes{}, errors.New(`cpu: /proc/stat: the first line is not "cpu user nice system idle ..."`)
	}
	return t, nil
}

// nextField returns the first space-separated field of b and what follows
// it; a nil field when there is none.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' {
		j++
	}
	if i == j {
		return nil, nil
	}
	return b[i:j], b[j:]
}

// parseCounter parses a decimal counter without allocating.
func parseCounter(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// atClkTck is the auxiliary vector entry holding the frequency of times(2)
// and of the tick counts in /proc (AT_CLKTCK in <elf.h>).
const atClkTck = 17

// ReadClockTick returns the kernel's clock-tick rate for user space
// (sysconf(_SC_CLK_TCK), the unit of /proc/stat and /proc/self/stat),
// read from root's proc/self/auxv. C libraries answer sysconf from the
// same AT_CLKTCK entry of the auxiliary vector the kernel gives every
// process; Go has no sysconf without cgo, and the file is the kernel's
// own copy of the vector.
func ReadClockTick(root string) (int, error) {
	data, err := os.ReadFile(filepath.Join(root, "proc", "self", "auxv"))
	if err != nil {
		return 0, fmt.Errorf("cpu: reading the clock tick: %w", err)
	}
	return ParseAuxvClockTick(data, strconv.IntSize/8, binary.NativeEndian)
}

// ParseAuxvClockTick returns the AT_CLKTCK entry of an auxiliary vector
// of (type, value) pairs of word bytes each, in order bo. A missing entry
// or an absurd rate (not 1 to 1,000,000 Hz) is an error.
func ParseAuxvClockTick(data []byte, word int, bo binary.ByteOrder) (int, error) {
	if word != 4 && word != 8 {
		return 0, fmt.Errorf("cpu: auxv word of %d bytes", word)
	}
	get := func(b []byte) uint64 {
		if word == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	for len(data) >= 2*word {
		typ, val := get(data), get(data[word:])
		data = data[2*word:]
		switch typ {
		case 0: // AT_NULL ends the vector
			return 0, errors.New("cpu: auxv has no AT_CLKTCK entry")
		case atClkTck:
			if val < 1 || val > 1000000 {
				return 0, fmt.Errorf("cpu: auxv AT_CLKTCK of %d Hz is absurd", val)
			}
			return int(val), nil
		}
	}
	return 0, errors.New("cpu: auxv has no AT_CLKTCK entry")
}

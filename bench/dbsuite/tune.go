package dbsuite

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sweeps of the tunable controllers, NAME@sweep: timeout's
// STATEMENT/LOCK timeouts (the suites' default is 5s/2s; MariaDB's lock
// timeouts are whole seconds) and ptkill's --busy-time (default 5s; whole
// seconds, pt-kill's unit).
var (
	TimeoutSweep = []string{"1s/1s", "2s/1s", "10s/5s"}
	PtkillSweep  = []string{"1s", "2s", "10s"}
)

// Base is the controller's name without its setting: "timeout" for
// "timeout@2s/1s".
func (c Controller) Base() string {
	b, _, _ := strings.Cut(c.Name, "@")
	return b
}

// apply returns opt with the controller's setting in place of the
// Options' values, or opt itself if the controller has none.
func (c Controller) apply(opt *Options) *Options {
	if c.StatementTimeout <= 0 && c.LockTimeout <= 0 && c.BusyTime <= 0 {
		return opt
	}
	o := *opt
	if c.StatementTimeout > 0 {
		o.StatementTimeout = c.StatementTimeout
	}
	if c.LockTimeout > 0 {
		o.LockTimeout = c.LockTimeout
	}
	if c.BusyTime > 0 {
		o.BusyTime = c.BusyTime
	}
	return &o
}

// SelectControllers resolves names among all (a suite's controllers):
// every one if names is empty or "all"; a name may take a setting,
// timeout@STATEMENT/LOCK (e.g. timeout@2s/1s) and ptkill@BUSY (e.g.
// ptkill@2s), or be NAME@sweep for the grid of TimeoutSweep or
// PtkillSweep.
func SelectControllers(all []Controller, names []string) ([]Controller, error) {
	var plain []string
	var tuned []Controller
	for _, n := range names {
		base, setting, ok := strings.Cut(n, "@")
		if !ok {
			plain = append(plain, n)
			continue
		}
		cs, err := selectByName(all, []string{base}, func(c Controller) string { return c.Name })
		if err != nil {
			return nil, err
		}
		settings := []string{setting}
		if setting == "sweep" {
			switch base {
			case "timeout":
				settings = TimeoutSweep
			case "ptkill":
				settings = PtkillSweep
			}
		}
		for _, st := range settings {
			c, err := tune(cs[0], st)
			if err != nil {
				return nil, err
			}
			tuned = append(tuned, c)
		}
	}
	var out []Controller
	if len(plain) > 0 || len(tuned) == 0 {
		var err error
		if out, err = selectByName(all, plain, func(c Controller) string { return c.Name }); err != nil {
			return nil, err
		}
	}
	for _, c := range tuned {
		if !slices.ContainsFunc(out, func(o Controller) bool { return o.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out, nil
}

// tune returns c at setting.
func tune(c Controller, setting string) (Controller, error) {
	name := c.Name + "@" + setting
	switch c.Name {
	case "timeout":
		ss, ls, ok := strings.Cut(setting, "/")
		st, err1 := time.ParseDuration(ss)
		lt, err2 := time.ParseDuration(ls)
		if !ok || err1 != nil || err2 != nil || st <= 0 || lt <= 0 || st > time.Hour || lt > time.Hour {
			return Controller{}, fmt.Errorf("dbsuite: controller %q: want timeout@STATEMENT/LOCK, durations in (0, 1h], e.g. timeout@2s/1s", name)
		}
		c.StatementTimeout, c.LockTimeout = st, lt
		c.Describe += fmt.Sprintf("; here statement %v, lock %v", st, lt)
	case "ptkill":
		bt, err := time.ParseDuration(setting)
		if err != nil || bt < time.Second || bt > time.Hour || bt%time.Second != 0 {
			return Controller{}, fmt.Errorf("dbsuite: controller %q: want ptkill@BUSY, whole seconds in [1s, 1h], e.g. ptkill@2s", name)
		}
		c.BusyTime = bt
		c.Describe += fmt.Sprintf("; here --busy-time %v", bt)
	default:
		return Controller{}, fmt.Errorf("dbsuite: controller %q takes no setting (tunable: timeout, ptkill)", name)
	}
	c.Name = name
	return c, nil
}

package main

import (
	"io"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/dagorsuite"
)

// FuzzGuardFlags parses fuzzed values of the guard's flags as the command
// does: every value is either refused with an error or turned into options
// that respect the documented bounds; nothing panics.
func FuzzGuardFlags(f *testing.F) {
	f.Add("250ms", "1s", "^VACUUM", "app,cron", "10", "1s", "postgres://x@127.0.0.1/db")
	f.Add("0", "-1s", "(", "", "0", "-5ms", "")
	f.Add("1h", "1ns", "[[:alpha:]]*", ",,,", "999999999999", "1e9h", "mysql://")
	f.Fuzz(func(t *testing.T, interval, slo, query, users, perMinute, minInterval, dsn string) {
		var gf guardFlags
		cmd := &cobra.Command{Use: "guard"}
		gf.register(cmd, true)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		args := []string{"--interval=" + interval, "--slo=" + slo, "--protect-query=" + query, "--protect-user=" + users,
			"--max-per-minute=" + perMinute, "--min-interval=" + minInterval, "--dsn=" + dsn}
		if err := cmd.Flags().Parse(args); err != nil {
			return // refused by the flag parser, with an error
		}
		o, err := gf.options(io.Discard)
		if err != nil {
			return
		}
		if o.Interval < 10*time.Millisecond || o.Interval > time.Minute || o.SLO <= 0 || o.MaxPerMinute < 1 || o.MinInterval < 0 {
			t.Fatalf("flags %q accepted as out-of-bounds options %+v", args, o)
		}
		if query != "" && o.Protect.Queries == nil {
			t.Fatalf("--protect-query %q accepted but not applied", query)
		}
	})
}

// FuzzSelection feeds the bench's case, controller and feed lists: each is
// refused with an error or selects known entries.
func FuzzSelection(f *testing.F) {
	for _, s := range []string{"all", "table-lock,kv-range", "", ",", "none,atropos", "nope", "0.5,1,4", "NaN", "-1", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if cs, err := bench.SelectCases("inproc", s); err == nil {
			for _, c := range cs {
				if c.Name == "" || c.Build == nil {
					t.Fatalf("SelectCases(%q) selected an empty case", s)
				}
			}
		}
		if ctls, err := bench.SelectControllers(s); err == nil {
			for _, c := range ctls {
				if c.Name == "" {
					t.Fatalf("SelectControllers(%q) selected a nameless controller", s)
				}
			}
		}
		if feeds, err := dagorsuite.ParseFeeds(s); err == nil {
			for _, x := range feeds {
				if !(x > 0) || x > 1e6 {
					t.Fatalf("ParseFeeds(%q) accepted feed %v", s, x)
				}
			}
		}
	})
}

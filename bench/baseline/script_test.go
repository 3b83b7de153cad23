package baseline_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
)

// runScript drives a with a script and returns the script with each
// command's actual result after "->". A script has one command a line:
//
//	admit <at>            -> bool   Admit(at)
//	admitn <at> <n>                  n calls of Admit(at), all expected true
//	start <at> <delay>    -> bool   Started(at, delay)
//	done <at> <service>              Done(at, service)
//	credits               -> int    Breakwater.Credits
//	inflight              -> int    Breakwater.InFlight
//	target                -> dur    Breakwater.Target
//	dropping              -> bool   CoDel.Dropping
//	drops                 -> int    CoDel.Drops
//
// Blank lines and lines starting with # are kept as they are.
func runScript(t *testing.T, a admit.Admitter, script string) string {
	t.Helper()
	var out strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(script), "\n") {
		line = strings.TrimSpace(line)
		cmd, _, _ := strings.Cut(line, "->")
		cmd = strings.TrimSpace(cmd)
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			out.WriteString(line + "\n")
			continue
		}
		f := strings.Fields(cmd)
		dur := func(i int) time.Duration {
			t.Helper()
			if i >= len(f) {
				t.Fatalf("%q: missing argument %d", line, i)
			}
			d, err := time.ParseDuration(f[i])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return d
		}
		var res any
		switch f[0] {
		case "admit":
			res = a.Admit(dur(1))
		case "admitn":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			for range n {
				if !a.Admit(dur(1)) {
					t.Fatalf("%q: Admit refused", line)
				}
			}
		case "start":
			res = a.Started(dur(1), dur(2))
		case "done":
			a.Done(dur(1), dur(2))
		case "credits":
			res = a.(*baseline.Breakwater).Credits()
		case "inflight":
			res = a.(*baseline.Breakwater).InFlight()
		case "target":
			res = a.(*baseline.Breakwater).Target()
		case "dropping":
			res = a.(*baseline.CoDel).Dropping()
		case "drops":
			res = a.(*baseline.CoDel).Drops()
		default:
			t.Fatalf("%q: unknown command", line)
		}
		out.WriteString(cmd)
		if res != nil {
			fmt.Fprintf(&out, " -> %v", res)
		}
		out.WriteString("\n")
	}
	return out.String()
}

// normalize trims each line of a script, as runScript does.
func normalize(script string) string {
	var out strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(script), "\n") {
		cmd, res, ok := strings.Cut(strings.TrimSpace(line), "->")
		out.WriteString(strings.TrimSpace(cmd))
		if ok {
			out.WriteString(" -> " + strings.TrimSpace(res))
		}
		out.WriteString("\n")
	}
	return out.String()
}

type scriptCase struct {
	name   string
	new    func() admit.Admitter
	script string
}

func runScripts(t *testing.T, tests []scriptCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := normalize(tt.script)
			got := runScript(t, tt.new(), tt.script)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("script mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

package cpusuite

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/cpu"
)

// TraceEnv names the environment variable that makes every process of a
// run write the trace of its friendly pool's loop: a directory, where
// process i of a run writes trace-kK-CONTROLLER-i.tsv (the parent's
// environment is its processes'). One line per tick: the time since the
// start of arrivals, the counters read, the estimate, the active count
// chosen, the work running and waiting, and the process's run-queue
// delay (the time its threads were runnable but not running, from the
// scheduler's statistics of every thread, /proc/self/task/*/schedstat)
// and the host's steal time.
const TraceEnv = "MOIRAI_CPU_TRACE"

// tracer collects a friendly pool's ticks for the trace file.
type tracer struct {
	start time.Time
	lines []string
	pool  func() cpu.Stats
}

func (t *tracer) observe(s cpu.StepInfo) {
	if len(t.lines) >= 100000 {
		return
	}
	st := t.pool()
	rq := runQueueDelay()
	t.lines = append(t.lines, fmt.Sprintf("%d\t%.2f\t%.2f\t%.2f\t%.3f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%d",
		time.Since(t.start).Milliseconds(), s.Sample.Self.Seconds(), s.Sample.Busy.Seconds(), s.Sample.Total.Seconds(),
		s.Share, s.Others, s.Free, s.Running, s.Active, st.Running, st.Waiting, rq.Microseconds(), s.Sample.Steal.Milliseconds()))
}

func (t *tracer) write(dir, name string) error {
	var b strings.Builder
	b.WriteString("t_ms\tself_s\tbusy_s\ttotal_s\tshare\tothers_cpus\tfree_cpus\trunning_mean\tactive\trunning\twaiting\trunq_us\tsteal_ms\n")
	for _, l := range t.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

// runQueueDelay sums the run-queue delay of the process's threads
// (the second field of /proc/self/task/*/schedstat, in nanoseconds).
func runQueueDelay() time.Duration {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, e := range ents {
		f, err := os.Open(filepath.Join("/proc/self/task", e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		if sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) >= 2 {
				if v, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
					sum += time.Duration(v)
				}
			}
		}
		f.Close()
	}
	return sum
}

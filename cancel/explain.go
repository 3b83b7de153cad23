package cancel

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// report appends to ev.Candidates the first limit candidates of order,
// each with its future use, its shares and why it was not chosen (the
// first is the chosen; best is the least-loss choice or -1, mr the main
// resource).
func (a *Atropos) report(s *snapshot.Snapshot, ev *Evaluation, mr *snapshot.Resource, order []int32, best int32, totals []float64, limit int) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	for k, i := range order[:min(limit, len(order))] {
		c := &cands[i]
		t := &s.Tasks[c.task]
		share := slices.Clone(vals[c.off : int(c.off)+dims])
		usage := make([]float64, dims)
		for d := range share {
			usage[d] = share[d] * totals[d]
		}
		why := ""
		switch {
		case k == 0:
		case cands[order[0]].background && !c.background:
			why = "foreground: a background task is a candidate, and background work is cancelled first"
		case c.dominated:
			why = "dominated: another candidate frees at least as much of every contended resource and loses no more"
		case !c.sufficient:
			why = "insufficient: " + mr.Name + " stays full without it"
		case best >= 0 && k > 0:
			why = "loses at least as much as the chosen"
		}
		ev.Candidates = append(ev.Candidates, Candidate{
			Task: t.ID, Class: t.Class, Key: t.Key, Progress: c.progress, Source: c.source,
			Usage: usage, Share: share, Score: c.score, Dominated: c.dominated,
			Loss: c.loss, Elapsed: t.Age, Sufficient: c.sufficient, Future: c.future, Background: c.background, Why: why,
		})
	}
}

// maxListed bounds the tasks an explanation lists as excluded.
const maxListed = 8

func (a *Atropos) reason(ev *Evaluation, leastLoss bool) string {
	c := &ev.Candidates[ev.Chosen]
	var frees []string
	for d, i := range ev.Contended {
		if c.Share[d] > 0 {
			frees = append(frees, fmt.Sprintf("%.0f%% of %s (contention %.2f)", 100*c.Share[d], ev.Levels[i].Resource, ev.Levels[i].Level))
		}
	}
	what := "future"
	if a.variant == CurrentUsage {
		what = "current"
	}
	among := fmt.Sprintf("%d candidate(s)", ev.Total)
	if a.variant != Greedy {
		among = fmt.Sprintf("%d non-dominated of %d candidate(s)", ev.Skyline, ev.Total)
	}
	how := "best of " + among
	if leastLoss {
		how = "least loss among those that free enough, of " + among
	}
	if c.Background {
		how = "background work first; " + how
	}
	if l := &ev.Levels[ev.Contended[ev.Main]]; l.KnownHeavy {
		if l.Level < a.cfg.minContention {
			how += fmt.Sprintf("; %s counted as contended before its level reached the threshold: tasks of classes known to be heavy on it leave the others too little while %d wait", l.Resource, l.Waiters)
		} else {
			how += fmt.Sprintf("; decided without confirmation: tasks of classes known to be heavy on %s leave the others too little while %d wait", l.Resource, l.Waiters)
		}
	}
	for _, m := range ev.Mixed {
		how += fmt.Sprintf("; class %q is mixed (its tasks use %.4g resource-s of %s typically, one used %.4g): its history is not trusted, its tasks' gains and losses come from their own holds, progress and age",
			m.Class, m.Typical, m.Resource, m.Peak)
	}
	return fmt.Sprintf("class %q frees %s of the %s use (from %s), loses %.3f resource-s after %v, progress %.2f (%s); %s",
		c.Class, strings.Join(frees, " and "), what, c.Future, c.Loss, c.Elapsed.Round(time.Millisecond), c.Progress, c.Source, how)
}

// Attrs returns the explanation as structured attributes, listing at most
// the first n candidates (the chosen first), each with its gains and its
// loss side by side, and the tasks left out for no gain.
func (ev *Evaluation) Attrs(n int) []slog.Attr {
	var lv []slog.Attr
	for _, l := range ev.Levels {
		if l.Level > 0 || l.Contended || l.Episode || l.Unrelieved {
			lv = append(lv, slog.Group(l.Resource,
				slog.Float64("level", round3(l.Level)),
				slog.Int("waiters", l.Waiters),
				slog.Bool("contended", l.Contended),
				slog.Bool("known_heavy", l.KnownHeavy),
				slog.Bool("episode", l.Episode),
				slog.Bool("unrelieved", l.Unrelieved),
				slog.Duration("min_gain", l.MinGain)))
		}
	}
	out := []slog.Attr{
		{Key: "contention", Value: slog.GroupValue(lv...)},
		slog.Int("candidates", ev.Total),
		slog.Int("non_dominated", ev.Skyline),
		slog.Group("excluded",
			slog.Int("not_cancellable", ev.NotCancellable),
			slog.Int("already_cancelled", ev.AlreadyCancelled),
			slog.Int("waiting_behind_another", ev.WaitingBehind),
			slog.Int("no_gain", ev.NoGain),
			slog.Int("dominated", ev.Total-ev.Skyline)),
	}
	var cs []slog.Attr
	for i := range ev.Candidates[:min(n, len(ev.Candidates))] {
		c := &ev.Candidates[i]
		var gains []slog.Attr
		for d, ri := range ev.Contended {
			gains = append(gains, slog.Float64(ev.Levels[ri].Resource, round3(c.Share[d])))
		}
		attrs := []any{
			slog.Uint64("task", c.Task),
			slog.String("class", c.Class),
			slog.Float64("progress", round3(c.Progress)),
			slog.String("progress_from", c.Source.String()),
			slog.String("future_from", c.Future.String()),
			slog.Float64("score", round3(c.Score)),
			slog.Attr{Key: "gains", Value: slog.GroupValue(gains...)},
			slog.Float64("loss_resource_s", round3(c.Loss)),
			slog.Duration("elapsed", c.Elapsed),
			slog.Bool("sufficient", c.Sufficient),
			slog.Bool("background", c.Background),
			slog.Bool("dominated", c.Dominated),
			slog.Bool("chosen", i == ev.Chosen),
		}
		if c.Why != "" {
			attrs = append(attrs, slog.String("why_not", c.Why))
		}
		cs = append(cs, slog.Group(fmt.Sprintf("#%d", i+1), attrs...))
	}
	out = append(out, slog.Attr{Key: "top", Value: slog.GroupValue(cs...)})
	if len(ev.NoGainTasks) > 0 {
		var ng []slog.Attr
		for _, x := range ev.NoGainTasks {
			ng = append(ng, slog.Group(strconv.FormatUint(x.Task, 10), slog.String("class", x.Class), slog.String("why", x.Why)))
		}
		out = append(out, slog.Attr{Key: "no_gain", Value: slog.GroupValue(ng...)})
	}
	if len(ev.Mixed) > 0 {
		var mx []slog.Attr
		for _, m := range ev.Mixed {
			mx = append(mx, slog.Group(m.Class, slog.String("resource", m.Resource),
				slog.Float64("typical_resource_s", m.Typical), slog.Float64("peak_resource_s", m.Peak)))
		}
		out = append(out, slog.Attr{Key: "mixed_classes", Value: slog.GroupValue(mx...)})
	}
	return out
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

package cancel

import (
	"slices"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// episode is the state of a resource on which a cancelled task held units:
// until its holds are released and a snapshot has been observed since with
// nobody waiting for it (the backlog the overload left has drained: the
// freed use came back), the resource is not decided on again.
type episode struct {
	holding  bool          // a cancelled task held it at the last observed snapshot
	since    time.Duration // when the episode began
	released time.Duration // the snapshot that saw the holds released
}

// maxEpisode bounds an episode: a cancelled task that keeps its holds
// that long ignored its cancellation, and a resource whose waiters have not
// drained that long after the release is still overloaded by others; the
// resource is decided on again.
const maxEpisode = time.Second

// followEpisodes opens, advances and closes the episodes from s.
func (a *Atropos) followEpisodes(s *snapshot.Snapshot) {
	for k, e := range a.episodes {
		if e.holding {
			e.holding = false
			a.episodes[k] = e
		}
	}
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !t.Cancelled {
			continue
		}
		first, n := int(t.First), int(t.N)
		if first < 0 || n < 0 || first+n > len(s.Usage) {
			continue
		}
		for ui := first; ui < first+n; ui++ {
			u := &s.Usage[ui]
			if u.Held <= 0 || u.Res < 0 || int(u.Res) >= len(s.Resources) {
				continue
			}
			k := keyOf(&s.Resources[u.Res])
			e, ok := a.episodes[k]
			if !ok {
				e.since = s.At
			}
			e.holding, e.released = true, 0
			a.episodes[k] = e
		}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		k := keyOf(r)
		e, ok := a.episodes[k]
		if !ok {
			continue
		}
		switch {
		case e.holding && s.At-e.since < maxEpisode:
		case !e.holding && e.released == 0:
			e.released = max(s.At, 1)
			a.episodes[k] = e
		case e.holding, r.Waiters == 0 && s.At > e.released, s.At-e.released >= maxEpisode:
			delete(a.episodes, k)
			a.forget(k)
		}
	}
	a.followJudgements(s)
	for k := range a.episodes {
		if !slices.ContainsFunc(s.Resources, func(r snapshot.Resource) bool { return keyOf(&r) == k }) {
			delete(a.episodes, k) // the resource is gone from the snapshots
		}
	}
}

// forget drops the contention measured on resource k up to the newest
// observed snapshot.
func (a *Atropos) forget(k resKey) {
	for i := range a.steps {
		for j := range a.steps[i].delay {
			kd := &a.steps[i].delay[j]
			if kd.key == k && kd.d > 0 {
				if a.sumDelay[k] -= kd.d; a.sumDelay[k] <= 0 {
					delete(a.sumDelay, k)
				}
				kd.d = 0
			}
		}
	}
}

// inEpisode reports whether r is in an episode.
func (a *Atropos) inEpisode(r *snapshot.Resource) bool {
	_, ok := a.episodes[keyOf(r)]
	return ok
}

// judgement is the state of a resource on which the policy cancelled
// tasks, until it knows whether the cancellations relieved it. It is
// opened at the decision (a task that ends before the next snapshot is
// never seen cancelled, and its cancellation is judged all the same) and
// does not stop decisions on the resource, as an episode does: it only
// says which classes' tasks are candidates there.
//
// A cancellation relieved the resource when, after it, a snapshot shows
// nobody waiting for it and, for a contention window after that, nobody
// waits again behind a task of the class cancelled. It did not when,
// maxEpisode after it, the others still wait behind tasks of that class,
// or wait again behind them within the window after the backlog drained:
// then the blame it rested on is refuted, the tasks of the class are not
// what keeps the others waiting there. A host whose other processes take
// the CPU stretches every hold, the light tasks pile up whatever is
// cancelled, and a class's learned use of the resource (its durations,
// its typical use, known heavy) is stretched with them; each further
// cancellation on the same grounds would throw away one more request, to
// be run again on a machine with no time to spare. Others waiting behind
// tasks of another class wait for another culprit, and refute nothing.
//
// While a cancellation is judged, and once it is refuted until nobody has
// waited for the resource for maxEpisode, a task of the class cancelled is
// a candidate there only on evidence of its own: its reported progress.
// Tasks of other classes are decided on as before: a culprit of a class of
// its own is still found, and a second culprit after a first.
type judgement struct {
	since   time.Duration // the last cancellation judged
	drained time.Duration // the first snapshot with nobody waiting after it (0: none yet)
	refuted bool          // judged: it did not relieve the resource
	quiet   time.Duration // refuted: since when nobody waits for it (0: somebody does)
	// classes holds the classes cancelled (at most maxJudged; past that,
	// all is set: every class).
	classes map[string]struct{}
	all     bool
	// tasks holds the tasks decided on and not yet seen cancelled or
	// gone (at most maxJudged): a decision the controller did not act on
	// (another cancellation too recent, a dry run) cancels nothing, and
	// is not judged.
	tasks []uint64
	// holders holds the other tasks of the classes cancelled that held
	// the resource at the decisions (at most maxJudged; past that,
	// allHolders is set: every task of those classes counts).
	holders    []uint64
	allHolders bool
}

// holding reports whether task id held the resource at a decision judged.
func (j *judgement) holding(id uint64) bool {
	return j.allHolders || slices.Contains(j.holders, id)
}

// maxJudged bounds the classes a judgement remembers.
const maxJudged = 64

// judge opens or extends the judgement of each resource the task id
// holds in s, as the policy cancels it.
func (a *Atropos) judge(s *snapshot.Snapshot, id uint64) {
	ti := slices.IndexFunc(s.Tasks, func(t snapshot.Task) bool { return t.ID == id })
	if ti < 0 {
		return
	}
	class := s.Tasks[ti].Class
	for _, u := range usageOf(s, ti) {
		if u.Held <= 0 || u.Res < 0 || int(u.Res) >= len(s.Resources) {
			continue
		}
		k := keyOf(&s.Resources[u.Res])
		j := a.judged[k]
		if !j.refuted {
			j.since, j.drained = s.At, 0
		}
		if j.classes == nil {
			j.classes = map[string]struct{}{}
		}
		if !j.refuted && len(j.tasks) < maxJudged {
			j.tasks = append(j.tasks, id)
		}
		if len(j.classes) < maxJudged {
			j.classes[class] = struct{}{}
		} else if _, ok := j.classes[class]; !ok {
			j.all = true
		}
		for i := range s.Usage {
			h := &s.Usage[i]
			if h.Res != u.Res || h.Held <= 0 || h.Task < 0 || int(h.Task) >= len(s.Tasks) || int(h.Task) == ti {
				continue
			}
			if t := &s.Tasks[h.Task]; t.Class == class && !slices.Contains(j.holders, t.ID) {
				if len(j.holders) < maxJudged {
					j.holders = append(j.holders, t.ID)
				} else {
					j.allHolders = true
				}
			}
		}
		a.judged[k] = j
	}
}

// followJudgements advances the judgements from s (see judgement).
func (a *Atropos) followJudgements(s *snapshot.Snapshot) {
	for k, j := range a.judged {
		i := slices.IndexFunc(s.Resources, func(r snapshot.Resource) bool { return keyOf(&r) == k })
		if i < 0 {
			delete(a.judged, k) // the resource is gone from the snapshots
			continue
		}
		r := &s.Resources[i]
		if !j.refuted && len(j.tasks) > 0 {
			// A task decided on, seen live and not cancelled: the
			// decision was not acted on. Seen cancelled, or gone: it was.
			acted := false
			for _, id := range j.tasks {
				ti := slices.IndexFunc(s.Tasks, func(t snapshot.Task) bool { return t.ID == id })
				acted = acted || ti < 0 || s.Tasks[ti].Cancelled
			}
			if !acted {
				delete(a.judged, k)
				continue
			}
			j.tasks = j.tasks[:0]
		}
		switch {
		case j.refuted && r.Waiters > 0:
			j.quiet = 0
		case j.refuted && j.quiet == 0:
			j.quiet = max(s.At, 1)
		case j.refuted:
			if s.At-j.quiet >= maxEpisode {
				// Nobody has waited for it for a while: the overload
				// the cancellation did not relieve is over.
				delete(a.judged, k)
				continue
			}
		case j.drained == 0 && r.Waiters == 0 && s.At > j.since:
			j.drained = s.At
		case j.drained == 0 && s.At-j.since >= maxEpisode:
			// Never drained: refuted if the others wait behind the
			// class cancelled, else they wait for another culprit.
			if !a.heldBy(s, i, &j) {
				delete(a.judged, k)
				continue
			}
			j.refuted = true
		case j.drained > 0 && r.Waiters > 0 && a.heldBy(s, i, &j):
			// The backlog drained for a moment; the others wait behind
			// the class cancelled again.
			j.refuted = true
		case j.drained > 0 && s.At-j.drained >= a.cfg.window:
			delete(a.judged, k) // relieved
			continue
		}
		a.judged[k] = j
	}
}

// heldBy reports whether a live task, not cancelled, of one of the classes
// of judgement j, one that held the resource when a cancellation judged
// was decided, holds resource res of s. A task of the class that came
// since (the next run of a recurring culprit, a client's retry) is a new
// incident: that the others wait behind it says nothing of whether the
// cancellation relieved them.
func (a *Atropos) heldBy(s *snapshot.Snapshot, res int, j *judgement) bool {
	for i := range s.Usage {
		u := &s.Usage[i]
		if int(u.Res) != res || u.Held <= 0 || u.Task < 0 || int(u.Task) >= len(s.Tasks) {
			continue
		}
		t := &s.Tasks[u.Task]
		if _, ok := j.classes[t.Class]; (ok || j.all) && !t.Cancelled && j.holding(t.ID) {
			return true
		}
	}
	return false
}

// judgedClass reports whether a cancellation of a task of class on
// resource r is being judged or was refuted (see judgement).
func (a *Atropos) judgedClass(class string, r *snapshot.Resource) bool {
	j, ok := a.judged[keyOf(r)]
	if !ok || (!j.refuted && len(j.tasks) > 0) {
		// None, or a decision not yet seen acted on (a dry run's
		// is never acted on, and is not judged).
		return false
	}
	_, in := j.classes[class]
	return in || j.all
}

// refutedRes reports whether a cancellation on r was refuted.
func (a *Atropos) refutedRes(r *snapshot.Resource) bool {
	return a.judged[keyOf(r)].refuted
}

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

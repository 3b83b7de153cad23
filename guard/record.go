package guard

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// A recording is JSON lines, one per poll, as the guard writes them to
// Options.Record (and, with Options.AuditPolls, among the decisions of
// the audit file):
//
//	{"time":"…","level":"INFO","msg":"poll","source":"postgres","scope":"app","observation":{…}}
//
// [ReadPolls] reads them back, skipping every other line, and [Replay]
// runs the decision logic on them.

// pollLine is one recorded poll.
type pollLine struct {
	Msg         string       `json:"msg"`
	Source      string       `json:"source"`
	Scope       string       `json:"scope"`
	Observation *Observation `json:"observation"`
}

// Recording is a recorded run: its polls, and the source and scope of
// the guard that recorded them.
type Recording struct {
	Source, Scope string
	Polls         []*Observation
}

// maxLine bounds one line of a recording (a poll of a few thousand
// sessions).
const maxLine = 64 << 20

// ReadPolls reads the polls recorded in r (a --record file or an audit
// file with polls), in order. Lines that are not polls are skipped; a
// line that is not JSON is an error naming it.
func ReadPolls(r io.Reader) (*Recording, error) {
	rec := &Recording{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l pollLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("guard: recording line %d: %w", n, err)
		}
		if l.Msg != "poll" || l.Observation == nil {
			continue
		}
		if l.Observation.Skipped == nil {
			l.Observation.Skipped = map[string]int{}
		}
		rec.Source, rec.Scope = l.Source, l.Scope
		rec.Polls = append(rec.Polls, l.Observation)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("guard: reading the recording: %w", err)
	}
	if len(rec.Polls) == 0 {
		return nil, errors.New("guard: the recording holds no poll (record with --record FILE, or --audit FILE --audit-polls)")
	}
	return rec, nil
}

// recordPoll writes obs to the recording, if any.
func (g *Guard) recordPoll(obs *Observation) {
	if g.recorder == nil {
		return
	}
	func() {
		defer func() { _ = recover() }() // a failing recorder never stops the guard
		g.recorder.Info("poll", "source", g.src.Name(), "scope", g.scope, "observation", obs)
	}()
}

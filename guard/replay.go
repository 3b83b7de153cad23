package guard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
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

// Replay runs the guard's decision logic on the recorded polls, as a dry
// run whose clock is the polls' own (the rate limits count in the
// recording's time), and returns what it decided. The scope is
// opt.Database, or every database with opt.AllDatabases, or else the
// recording's.
func Replay(rec *Recording, opt Options) ([]Decision, error) {
	src := &replaySource{rec: rec}
	if opt.Database == "" && !opt.AllDatabases {
		if rec.Scope == "" {
			opt.AllDatabases = true // the recording's guard acted everywhere
		}
		opt.Database = rec.Scope
	}
	opt.DryRun, opt.Audit, opt.Record, opt.Registerer = true, nil, nil, nil
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g, err := New(src, opt)
	if err != nil {
		return nil, err
	}
	first := rec.Polls[0].At
	g.clock = func() time.Duration { return src.at.Sub(first) }
	var all []Decision
	for range rec.Polls {
		ds, err := g.Step(context.Background())
		if err != nil {
			return all, err
		}
		all = append(all, ds...)
	}
	return all, nil
}

// replaySource serves recorded polls, in order.
type replaySource struct {
	rec *Recording
	n   int
	at  time.Time
}

func (r *replaySource) Name() string {
	if r.rec.Source != "" {
		return r.rec.Source
	}
	return "replay"
}

func (r *replaySource) Check(context.Context) (ServerInfo, error) {
	return ServerInfo{Version: "recording"}, nil
}

func (r *replaySource) Poll(context.Context) (*Observation, error) {
	if r.n >= len(r.rec.Polls) {
		return nil, io.EOF
	}
	o := *r.rec.Polls[r.n]
	r.n++
	r.at = o.At
	return &o, nil
}

func (r *replaySource) Cancel(context.Context, Target) error    { return nil }
func (r *replaySource) Terminate(context.Context, Target) error { return nil }
func (r *replaySource) Close() error                            { return nil }

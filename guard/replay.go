package guard

import (
	"context"
	"io"
	"log/slog"
	"time"
)

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
		opt.Logger = slog.New(slog.DiscardHandler)
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

package moirai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/tree"
)

// CancelTree cancels t, a task of this controller, because a service it
// called cancelled the call as the culprit of an overload there (the
// answer culprit, see package tree): cancelling t cancels every other
// downstream call t makes, so the whole tree lets go of what it holds, and
// t's own server middleware answers its caller in turn. The cancellation
// goes through the safety checks and the decision log (policy "tree", the
// reason naming the hop that decided), but not the minimum interval
// between cancellations; t's context's cause wraps both [ErrCancelled] and
// culprit, so [Retry] does not re-execute t before culprit.Wait.
//
// It refuses, returning an error and changing nothing, when culprit names
// another tree than t's (Spec.Tree), or t is not live, not cancellable or
// already cancelled. Middleware calls it; safe for concurrent use.
func (c *Controller) CancelTree(t *Task, culprit *tree.Culprit) error {
	if t == nil || culprit == nil {
		return errors.New("moirai: CancelTree of a nil task or culprit")
	}
	if culprit.Tree == "" || culprit.Tree != t.Spec().Tree {
		return fmt.Errorf("moirai: task %d not cancelled: the culprit answer names tree %q, the task serves %q", t.ID(), culprit.Tree, t.Spec().Tree)
	}
	id, _ := tree.Split(culprit.Tree)
	reason := fmt.Sprintf("request tree %s: its call was cancelled as a culprit at %s (%s); expected wait there %v", id, culprit.Hop, culprit.Reason, culprit.Wait)
	c.mu.Lock()
	rec, ctx := c.actLocked(policy.Decision{Policy: "tree", Action: policy.Cancel, Task: t.ID(), Reason: reason}, true, culprit)
	c.mu.Unlock()
	c.publish([]policy.Record{rec}, []context.Context{ctx})
	if rec.Outcome != policy.Acted {
		return fmt.Errorf("moirai: task %d not cancelled: %s", t.ID(), rec.Note)
	}
	return nil
}

// CulpritAnswer returns the culprit answer a server whose hop is named hop
// gives for the task in ctx once its handler has returned, or false when
// there is none: the task serves no tree, or was not cancelled by a
// controller. A task cancelled because a call of its own was a culprit
// elsewhere (see [Controller.CancelTree]) answers with that culprit, the
// hop that decided unchanged; a task this controller cancelled answers
// with hop, the controller's reason, and the class's expected wait
// ([Controller.ExpectedWait]). Server middleware calls it.
func (c *Controller) CulpritAnswer(ctx context.Context, hop string) (*tree.Culprit, bool) {
	t := From(ctx)
	if t == nil || t.Spec().Tree == "" {
		return nil, false
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, ErrCancelled) || !t.Cancelled() {
		return nil, false
	}
	if cu, ok := tree.Of(cause); ok {
		return cu, true
	}
	reason := strings.TrimPrefix(strings.TrimPrefix(cause.Error(), ErrCancelled.Error()), ": ")
	return tree.Answer(t.Spec().Tree, hop, reason, c.ExpectedWait(t.Spec().Class)), true
}

// TreeStats is what the middleware of a controller reports about request
// trees.
type TreeStats struct {
	// IgnoredCulprits counts the culprit answers the middleware ignored:
	// from a downstream not trusted (all of them, when none is), that do
	// not parse, that name another tree than the caller's task's, or that
	// a handler passed on from a downstream as its own answer (which the
	// server middleware strips: only a hop's middleware answers for it).
	IgnoredCulprits int64
	// NoTrustedPeer is true when a middleware of the controller enables
	// request trees without trusting any peer (no WithTrustedPeer on a
	// server with WithTree, or WithTreeCancel trusting nobody): the tree
	// then cancels nothing upward from it, and every culprit answer it
	// gets is ignored.
	NoTrustedPeer bool
}

// TreeStats returns what the middleware reported about request trees.
// Safe for concurrent use.
func (c *Controller) TreeStats() TreeStats {
	return TreeStats{IgnoredCulprits: c.ignoredCulprits.Load(), NoTrustedPeer: c.noTrustedPeer.Load()}
}

func init() {
	mwx.IgnoredCulprit = func(ctl any) {
		if c, ok := ctl.(*Controller); ok && c != nil {
			c.ignoredCulprits.Add(1)
		}
	}
	mwx.NoTrustedPeer = func(ctl any, why string) {
		if c, ok := ctl.(*Controller); ok && c != nil {
			c.noTrustedPeer.Store(true)
			c.log.LogAttrs(context.Background(), slog.LevelWarn, "moirai tree", slog.String("warning", why))
		}
	}
}

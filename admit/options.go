package admit

import (
	"time"

	"github.com/moirai-go/moirai/internal/opt"
)

// Defaults of [NewDAGOR], DAGOR's (SoCC'18 §4).
const (
	DefaultWindow      = time.Second
	DefaultWindowCount = 2000
	DefaultThreshold   = 20 * time.Millisecond
	DefaultAlpha       = 0.05
	DefaultBeta        = 0.01
	// DefaultGrace is how long after a cut continuations are still
	// admitted at the level before it (see [DAGOR.AdmitContinuation]).
	DefaultGrace = time.Second
)

// dagorConfig is what Options set.
type dagorConfig struct {
	window      time.Duration
	windowCount int64
	threshold   time.Duration
	alpha, beta float64
	grace       time.Duration
	regular     func(bool)
}

// An Option configures [NewDAGOR].
type Option func(*dagorConfig)

// WithWindow sets the detection window: it closes after d or after n
// started requests, whichever comes first (1 s and 2,000 by default).
// Non-positive values leave the defaults.
func WithWindow(d time.Duration, n int) Option {
	return func(c *dagorConfig) {
		opt.Set(&c.window, d, d > 0)
		opt.Set(&c.windowCount, int64(n), n > 0)
	}
}

// WithThreshold sets the average queueing time above which a window
// counts as overloaded (20 ms by default). A non-positive d leaves it.
func WithThreshold(d time.Duration) Option {
	return func(c *dagorConfig) { opt.Set(&c.threshold, d, d > 0) }
}

// WithSteps sets α, the fraction by which the admitted load shrinks
// after an overloaded window, and β, the fraction by which it grows after
// a calm one (5 % and 1 % by default). Values outside (0, 1) leave them.
func WithSteps(alpha, beta float64) Option {
	return func(c *dagorConfig) {
		opt.Set(&c.alpha, alpha, alpha > 0 && alpha < 1)
		opt.Set(&c.beta, beta, beta > 0 && beta < 1)
	}
}

// WithGrace sets how long after the level falls a continuation (a
// call of a task that an earlier call already got through, see
// [DAGOR.AdmitContinuation]) is still admitted at the level before the
// fall (1 s by default, about a request's deadline). A negative d turns
// continuations off: they are admitted as any request; 0 leaves the
// default.
func WithGrace(d time.Duration) Option {
	return func(c *dagorConfig) { opt.Set(&c.grace, max(d, 0), d != 0) }
}

// WithOverloadHook sets a function called at the end of every window
// with whether the window was overloaded. It is how a controller learns that
// the server is in "regular" overload (queueing, not a contended resource);
// see moirai.WithRegularOverload.
func WithOverloadHook(f func(overloaded bool)) Option {
	return func(c *dagorConfig) { c.regular = f }
}

package taskx

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/moirai-go/moirai/internal/enum"
)

// Kind says what sort of work a task is.
type Kind uint8

const (
	// Request is work a caller waits for: an RPC, an HTTP request, a query.
	Request Kind = iota
	// Background is work nobody waits for: a purge, a compaction, a backup.
	Background
)

var kindNames = [...]string{Request: "request", Background: "background"}

// String returns "request" or "background".
func (k Kind) String() string { return enum.Name(k, kindNames[:], "kind") }

// ParseKind parses the names printed by [Kind.String].
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "request", "":
		return Request, nil
	case "background":
		return Background, nil
	}
	return 0, fmt.Errorf("task: unknown kind %q (want request or background)", s)
}

// Priority is DAGOR's compound priority. Lower numbers are more important:
// Business 0 is the most important business priority, User 0 the most
// important user priority. The zero value is the highest priority.
type Priority struct {
	Business uint8
	User     uint8
}

// Less reports whether p is more important than q: business priority first,
// then user priority.
func (p Priority) Less(q Priority) bool {
	if p.Business != q.Business {
		return p.Business < q.Business
	}
	return p.User < q.User
}

// String formats p as "B/U".
func (p Priority) String() string { return fmt.Sprintf("%d/%d", p.Business, p.User) }

// DefaultGoal is the [Spec.MaxDeferral] of a task whose spec leaves it
// zero: the task may spend at most half as long deferred by others as it
// spends running.
const DefaultGoal = 0.5

// Spec describes a task when it begins. The zero value describes a
// non-cancellable request with no key, class or path, the default goal and
// the highest priority.
type Spec struct {
	// Key groups tasks that belong together, such as the requests of one
	// connection or one tenant. Optional.
	Key string
	// Class is a fingerprint of the kind of work (a route, a statement
	// shape). The runtime learns the typical duration of each class to
	// estimate the progress of tasks that report none.
	Class string
	// Kind is Request (the default) or Background.
	Kind Kind
	// Cancellable marks a task the controller may cancel. Only cancellable
	// tasks are ever cancelled.
	Cancellable bool
	// Priority is the task's admission priority.
	Priority Priority
	// Path names the downstream path the task takes (for path fences).
	Path string
	// Tree is the identity of the request tree the task serves (see
	// package tree): its root's ID and class, as middleware carries it
	// between services. Empty when the task belongs to no tree.
	Tree string
	// MaxDeferral is how long the task tolerates being deferred by others
	// (waiting for what they hold) for each second it runs: 0.5 means
	// deferred at most half as long as it runs; penalties act on the tasks
	// that defer it more. Zero means [DefaultGoal]; negative, NaN and
	// infinite values are invalid.
	MaxDeferral float64
	// Goal is the former name of MaxDeferral, read when MaxDeferral is zero.
	// A normalized spec (as a task holds it) has both set to the same value.
	//
	// Deprecated: use MaxDeferral; Goal read beside Objective as if it were
	// a latency goal.
	Goal float64
	// Objective is the latency the task is expected to end within: its
	// route's objective, for the quantile of the controller's objective.
	// Zero means the controller's (moirai.WithSLO); [NoObjective] means
	// none: the task's latency never counts as a miss, so its misses never
	// make a detector fire (a Background task has no objective either,
	// whatever this field says). Other negative values are invalid.
	Objective time.Duration
}

// NoObjective is the [Spec.Objective] of a task whose latency is nobody's
// objective: it is never counted as a miss.
const NoObjective time.Duration = -1

// HasObjective reports whether misses of a task of this spec count: it is
// a request whose objective is not [NoObjective].
func (s Spec) HasObjective() bool { return s.Kind == Request && s.Objective >= 0 }

// ErrInvalidSpec is wrapped by the errors [Spec.Validate] returns.
var ErrInvalidSpec = errors.New("task: invalid spec")

// Validate reports whether the spec is usable as it is. Begin never fails:
// it replaces an invalid field with its default and reports the error
// Validate would have returned.
func (s Spec) Validate() error {
	s.foldGoal()
	if math.IsNaN(s.Goal) || math.IsInf(s.Goal, 0) || s.Goal < 0 {
		return fmt.Errorf("%w: max deferral %v must be a positive finite number (or 0 for the default %v)", ErrInvalidSpec, s.Goal, DefaultGoal)
	}
	if s.Kind > Background {
		return fmt.Errorf("%w: %v", ErrInvalidSpec, s.Kind)
	}
	if s.Objective < 0 && s.Objective != NoObjective {
		return fmt.Errorf("%w: objective %v must be positive (or 0 for the controller's, or NoObjective)", ErrInvalidSpec, s.Objective)
	}
	return nil
}

// foldGoal makes MaxDeferral and the deprecated Goal one value: MaxDeferral
// when set, else Goal. The runtime reads Goal.
func (s *Spec) foldGoal() {
	if s.MaxDeferral != 0 {
		s.Goal = s.MaxDeferral
	}
	s.MaxDeferral = s.Goal
}

// normalize replaces the spec's invalid or zero fields by their defaults,
// in place (Begin normalizes the task's own copy: a Spec is a dozen words),
// and returns the validation error if any field was invalid.
func (s *Spec) normalize() error {
	s.foldGoal()
	if s.Goal >= 0 && s.Goal <= math.MaxFloat64 && s.Kind <= Background && (s.Objective >= 0 || s.Objective == NoObjective) {
		if s.Goal == 0 {
			s.Goal, s.MaxDeferral = DefaultGoal, DefaultGoal
		}
		return nil
	}
	err := s.Validate()
	if math.IsNaN(s.Goal) || math.IsInf(s.Goal, 0) || s.Goal <= 0 {
		s.Goal, s.MaxDeferral = DefaultGoal, DefaultGoal
	}
	if s.Kind > Background {
		s.Kind = Request
	}
	if s.Objective < 0 && s.Objective != NoObjective {
		s.Objective = 0
	}
	return err
}

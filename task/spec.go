package task

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Kind says what sort of work a task is.
type Kind uint8

const (
	// Request is work a caller waits for: an RPC, an HTTP request, a query.
	Request Kind = iota
	// Background is work nobody waits for: a purge, a compaction, a backup.
	Background
)

// String returns "request" or "background".
func (k Kind) String() string {
	switch k {
	case Request:
		return "request"
	case Background:
		return "background"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

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

// DefaultGoal is the isolation goal λ of a task whose spec leaves it zero:
// the task may spend at most half as long deferred by others as it spends
// running (pBox's evaluation setting).
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
	// Goal is the task's isolation goal λ: the largest tolerated ratio of
	// time deferred by others to time running. Zero means [DefaultGoal];
	// negative, NaN and infinite goals are invalid.
	Goal float64
}

// ErrInvalidSpec is wrapped by the errors [Spec.Validate] returns.
var ErrInvalidSpec = errors.New("task: invalid spec")

// Validate reports whether the spec is usable as it is. Begin never fails:
// it replaces an invalid field with its default and reports the error
// Validate would have returned.
func (s Spec) Validate() error {
	if math.IsNaN(s.Goal) || math.IsInf(s.Goal, 0) || s.Goal < 0 {
		return fmt.Errorf("%w: isolation goal %v must be a positive finite number (or 0 for the default %v)", ErrInvalidSpec, s.Goal, DefaultGoal)
	}
	if s.Kind > Background {
		return fmt.Errorf("%w: %v", ErrInvalidSpec, s.Kind)
	}
	return nil
}

// normalize returns the spec with invalid or zero fields replaced by their
// defaults, and the validation error if any field was invalid.
func (s Spec) normalize() (Spec, error) {
	if s.Goal >= 0 && s.Goal <= math.MaxFloat64 && s.Kind <= Background {
		if s.Goal == 0 {
			s.Goal = DefaultGoal
		}
		return s, nil
	}
	err := s.Validate()
	if math.IsNaN(s.Goal) || math.IsInf(s.Goal, 0) || s.Goal <= 0 {
		s.Goal = DefaultGoal
	}
	if s.Kind > Background {
		s.Kind = Request
	}
	return s, err
}

package admit

import "github.com/moirai-go/moirai/task"

// Sizes of the compound admission level.
const (
	// BusinessLevels is the number of business priorities; business
	// priorities at or above it count as the lowest.
	BusinessLevels = 64
	// UserLevels is the number of user priorities (DAGOR's 128).
	UserLevels = 128
	levels     = BusinessLevels * UserLevels
)

// A Level is a compound admission level (B, U): a request of priority
// (b, u) is admitted when b < B, or b == B and u <= U. The zero Level admits
// only the most important requests; [AdmitAll] admits everything.
type Level struct {
	Business uint8
	User     uint8
}

// AdmitAll is the level of a server that is not overloaded.
var AdmitAll = Level{Business: BusinessLevels - 1, User: UserLevels - 1}

func (l Level) index() int32 { return int32(l.Business)*UserLevels + int32(l.User) }

func levelOf(i int32) Level {
	return Level{Business: uint8(i / UserLevels), User: uint8(i % UserLevels)}
}

// Admits reports whether a request of priority p passes level l.
func (l Level) Admits(p task.Priority) bool { return prioIndex(p) <= l.index() }

func prioIndex(p task.Priority) int32 {
	b, u := int32(p.Business), int32(p.User)
	if b >= BusinessLevels {
		b = BusinessLevels - 1
	}
	if u >= UserLevels {
		u = UserLevels - 1
	}
	return b*UserLevels + u
}

// Level returns the current admission level, the one every response
// carries to the server's callers.
func (d *DAGOR) Level() Level { return levelOf(d.level.Load()) }

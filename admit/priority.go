package admit

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/task"
)

// Actions is an entry service's table from action (an RPC method, an HTTP
// route) to business priority. Actions it does not list get the lowest
// business priority.
type Actions map[string]uint8

// Business returns the business priority of action.
func (a Actions) Business(action string) uint8 {
	if b, ok := a[action]; ok && b < BusinessLevels {
		return b
	}
	return BusinessLevels - 1
}

// DefaultUserPeriod is how long a user keeps one user priority.
const DefaultUserPeriod = time.Hour

// UserHasher maps user IDs to DAGOR's 128 user priorities with a keyed hash
// whose key changes every period: within a period a user is admitted or
// rejected consistently, across periods every user gets its turn. The hash
// is not cryptographic; the key only needs to be unpredictable to users if
// they can choose their IDs.
type UserHasher struct {
	key    uint64
	period time.Duration
}

// NewUserHasher returns a hasher keyed by key, re-keyed every period
// (DefaultUserPeriod if period is not positive). Entry services of one
// system share the key so that they agree.
func NewUserHasher(key uint64, period time.Duration) UserHasher {
	if period <= 0 {
		period = DefaultUserPeriod
	}
	return UserHasher{key: key, period: period}
}

// User returns the user priority of id at wall-clock time now.
func (h UserHasher) User(id string, now time.Time) uint8 {
	epoch := uint64(now.UnixNano() / int64(h.period))
	x := mix(h.key ^ mix(epoch))
	for i := 0; i < len(id); i++ {
		x = (x ^ uint64(id[i])) * 0x100000001b3
	}
	return uint8(mix(x) % UserLevels)
}

// mix is the SplitMix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// maxLevelText bounds what [ParseLevel] and [ParsePriority] read: "63/127".
const maxLevelText = 7

// malformed counts the priority and level values that [ParseLevel] and
// [ParsePriority] refused: malformed, oversized or out of range.
var malformed atomic.Int64

// Malformed returns how many priority and level values were refused since
// the process started.
func Malformed() int64 { return malformed.Load() }

// FormatLevel formats l as "B/U", the form of the level header and
// metadata.
func FormatLevel(l Level) string { return formatPair(l.Business, l.User) }

// FormatPriority formats p as "B/U".
func FormatPriority(p task.Priority) string { return formatPair(p.Business, p.User) }

// AppendLevel appends "B/U" to b without allocating.
func AppendLevel(b []byte, l Level) []byte {
	b = strconv.AppendUint(b, uint64(l.Business), 10)
	b = append(b, '/')
	return strconv.AppendUint(b, uint64(l.User), 10)
}

func formatPair(b, u uint8) string {
	var buf [maxLevelText + 1]byte
	return string(AppendLevel(buf[:0], Level{b, u}))
}

// ParseLevel parses "B/U" with B < BusinessLevels and U < UserLevels. Any
// other text (empty, oversized, signs, spaces, out of range) is refused and
// counted in [Malformed].
func ParseLevel(s string) (Level, bool) {
	b, u, ok := parsePair(s)
	if !ok {
		malformed.Add(1)
		return Level{}, false
	}
	return Level{b, u}, true
}

// ParsePriority parses a priority in the form of [ParseLevel].
func ParsePriority(s string) (task.Priority, bool) {
	b, u, ok := parsePair(s)
	if !ok {
		malformed.Add(1)
		return task.Priority{}, false
	}
	return task.Priority{Business: b, User: u}, true
}

func parsePair(s string) (b, u uint8, ok bool) {
	if len(s) < 3 || len(s) > maxLevelText {
		return 0, 0, false
	}
	var n [2]uint32
	k, digits := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 3 {
				return 0, 0, false
			}
			n[k] = n[k]*10 + uint32(c-'0')
			digits++
		case c == '/' && k == 0 && digits > 0:
			k, digits = 1, 0
		default:
			return 0, 0, false
		}
	}
	if k != 1 || digits == 0 || n[0] >= BusinessLevels || n[1] >= UserLevels {
		return 0, 0, false
	}
	return uint8(n[0]), uint8(n[1]), true
}

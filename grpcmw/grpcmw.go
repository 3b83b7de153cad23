package grpcmw

import (
	"errors"
	"sync/atomic"

	"github.com/moirai-go/moirai/internal/mwx"
)

// Metadata keys of DAGOR's cooperation.
const (
	// KeyPriority carries a call's priority "B/U" downstream; honoured only
	// from trusted peers.
	KeyPriority = mwx.PriorityName
	// KeyLevel carries the server's admission level "B/U" in the response
	// header of every call, admitted or rejected.
	KeyLevel = mwx.LevelName
	// KeyContinuation, "1", marks a call of a task that an earlier call
	// already got through (admit.DAGOR.AdmitContinuation); honoured only
	// from trusted peers.
	KeyContinuation = mwx.ContinuationName
)

// Lowest is the priority of a call nobody assigned a priority to.
var Lowest = mwx.Lowest

// ErrShed is the cause of the ResourceExhausted error a client interceptor
// returns for a call it sheds locally.
var ErrShed = errors.New("grpcmw: call shed locally: downstream admission level")

var forgedCulprits, untrustedTrees atomic.Int64

// ForgedCulprits returns how many culprit answers the client interceptors
// ignored: from a downstream not trusted, or naming a tree other than the
// caller's task's.
func ForgedCulprits() int64 { return forgedCulprits.Load() }

// UntrustedTrees returns how many tree identities the server
// interceptors ignored: from a peer not trusted, or malformed.
func UntrustedTrees() int64 { return untrustedTrees.Load() }

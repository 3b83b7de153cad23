package grpcmw

import (
	"errors"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
)

// Metadata keys of DAGOR's cooperation.
const (
	// KeyPriority carries a call's priority "B/U" downstream; honoured only
	// from trusted peers.
	KeyPriority = "moirai-priority"
	// KeyLevel carries the server's admission level "B/U" in the response
	// header of every call, admitted or rejected.
	KeyLevel = "moirai-level"
	// KeyContinuation, "1", marks a call of a task that an earlier call
	// already got through (admit.DAGOR.AdmitContinuation); honoured only
	// from trusted peers.
	KeyContinuation = "moirai-continuation"
)

// Lowest is the priority of a call nobody assigned a priority to.
var Lowest = moirai.Priority{Business: admit.BusinessLevels - 1, User: admit.UserLevels - 1}

// ErrShed is the cause of the ResourceExhausted error a client interceptor
// returns for a call it sheds locally.
var ErrShed = errors.New("grpcmw: call shed locally: downstream admission level")

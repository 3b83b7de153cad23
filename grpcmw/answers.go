package grpcmw

import "time"

// KeyRetryAfter is the trailer metadata key of a cancelled call's
// expected wait, in whole seconds (at least 1): its class's expected wait
// (moirai.Controller.ExpectedWait), as HTTP's Retry-After.
const KeyRetryAfter = "moirai-retry-after"

// maxRetryAfter bounds the retry-after of a cancelled call.
const maxRetryAfter = time.Hour

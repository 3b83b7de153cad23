package httpmw

import (
	"net/http"
	"testing"

	"github.com/moirai-go/moirai/internal/mwx"
)

// The headers are the canonical forms of the names grpcmw's metadata
// keys spell: one cooperation, whatever the protocol.
func TestHeaderNames(t *testing.T) {
	for name, header := range map[string]string{
		mwx.PriorityName:     HeaderPriority,
		mwx.LevelName:        HeaderLevel,
		mwx.ContinuationName: HeaderContinuation,
	} {
		if got := http.CanonicalHeaderKey(name); got != header {
			t.Errorf("header of %q is %q, want %q", name, header, got)
		}
	}
}

package debugpage

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/moirai-go/moirai"
)

// ReexecutionView is what moirai.Retry did on the controller.
type ReexecutionView struct {
	Waiting    int    `json:"waiting"`
	Reexecuted uint64 `json:"admitted"`
	Completed  uint64 `json:"completed"`
	Dropped    uint64 `json:"dropped"`
	Cancelled  uint64 `json:"cancelled"`
	Capped     uint64 `json:"capped"`
}

func reexecutionView(s moirai.RetryStats) ReexecutionView {
	return ReexecutionView{Waiting: s.Waiting, Reexecuted: s.Reexecuted, Completed: s.Completed,
		Dropped: s.Dropped, Cancelled: s.Cancelled, Capped: s.Capped}
}

// TreeView is what the middleware reported about request trees.
type TreeView struct {
	// IgnoredCulprits counts the culprit answers ignored: from untrusted
	// downstreams, malformed, about another tree, or passed on by a
	// handler (moirai.TreeStats).
	IgnoredCulprits int64 `json:"ignored_culprits"`
	// NoTrustedPeer says a middleware enables request trees while
	// trusting no peer: the tree cancels nothing upward from here.
	NoTrustedPeer bool `json:"no_trusted_peer"`
}

// detailValue is how the live page writes a decision detail's value: a
// duration as its text, anything else as its value.
func detailValue(v slog.Value) any {
	switch v.Kind() {
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindTime:
		return v.Time()
	default:
		return v.Any()
	}
}

// detailText renders a detail value on the page: an object as key=value
// pairs in key order, nested in braces.
func detailText(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedAnyKeys(m) {
		parts = append(parts, k+"="+detailText(m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func sortedAnyKeys(m map[string]any) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// pct renders a progress fraction, or a dash for none.
func pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100**p)
}

package guard

import (
	"fmt"
	"io"
	"strings"
)

// WriteDecisions writes ds for a terminal, one or two lines each ("no
// decision" when ds is empty), every server-supplied string escaped.
func WriteDecisions(w io.Writer, ds []Decision) error {
	var b strings.Builder
	if len(ds) == 0 {
		b.WriteString("no decision\n")
	}
	for _, d := range ds {
		if d.Outcome == OutcomeNoAction {
			fmt.Fprintf(&b, "no action on %s: root session %d (%s@%s), %d waiting: %s\n", Escape(d.Resource), d.Root,
				Escape(d.User), Escape(d.App), len(d.Waiters), Escape(d.Note))
			continue
		}
		fmt.Fprintf(&b, "%s session %d (%s@%s): %s %s\n  %s\n", Escape(d.Action), d.Target.Session,
			Escape(d.User), Escape(d.App), Escape(d.Outcome), Escape(d.Note), Escape(d.Reason))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

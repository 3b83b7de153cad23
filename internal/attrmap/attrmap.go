// Package attrmap turns a decision's structured details (slog attributes)
// into JSON-ready maps, for the live page and the guard's decision log.
package attrmap

import "log/slog"

// Map returns as as a map: a group becomes a nested map, any other value
// what leaf returns for it (its resolved value). It returns nil for no
// attributes, so that an empty explanation is omitted, not written {}.
func Map(as []slog.Attr, leaf func(slog.Value) any) map[string]any {
	if len(as) == 0 {
		return nil
	}
	m := make(map[string]any, len(as))
	for _, a := range as {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			m[a.Key] = Map(v.Group(), leaf)
			continue
		}
		m[a.Key] = leaf(v)
	}
	return m
}

// Package enum names the values of the library's small enumerations
// (policy.Action, estimate.Source, resource.Kind, …): each keeps its names
// in a table indexed by value, and its String method asks this package, so
// that every enumeration prints an unnamed value the same way.
package enum

import "fmt"

// Name returns names[v], or kind(v), as "action(7)", for a value names has
// no name for.
func Name[T ~uint8](v T, names []string, kind string) string {
	if n := NameOr(v, names, ""); n != "" {
		return n
	}
	return fmt.Sprintf("%s(%d)", kind, uint8(v))
}

// NameOr returns names[v], or unknown for a value names has no name for.
func NameOr[T ~uint8](v T, names []string, unknown string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return unknown
}

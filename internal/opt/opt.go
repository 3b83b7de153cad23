// Package opt holds what the library's functional options share. An
// option of a constructor that cannot fail keeps its setting's default
// for an invalid value (CONTRIBUTING.md, "One option style"); [Set] is
// that rule, so that every option states only which values are valid.
package opt

// Set stores v in *setting when valid; otherwise *setting keeps what the
// constructor put there before the options ran.
func Set[T any](setting *T, v T, valid bool) {
	if valid {
		*setting = v
	}
}

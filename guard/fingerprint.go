package guard

import "strings"

// Fingerprint returns the class of a SQL statement: its text with string,
// numeric and hexadecimal literals replaced by ?, lists of literals
// collapsed to one, comments removed, whitespace collapsed and everything
// outside quoted identifiers lower-cased. Statements that differ only in
// their constants share a fingerprint, which is what the guard learns
// typical durations by.
//
// It is a lexer, not a parser: for text it cannot read (an unterminated
// quote) it returns what it has, never fails.
//
// long: one lexer loop, whose states read best together.
func Fingerprint(q string) string {
	var b strings.Builder
	b.Grow(len(q))
	space := false
	emit := func(s string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(s)
	}
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			space = true
			i++
		case c == '-' && i+1 < len(q) && q[i+1] == '-', c == '#':
			for i < len(q) && q[i] != '\n' {
				i++
			}
			space = true
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				i = len(q)
			} else {
				i += end + 4
			}
			space = true
		case c == '\'':
			i = skipQuoted(q, i, c)
			emit("?")
		case c == '"' || c == '`':
			j := skipQuoted(q, i, c)
			emit(q[i:j])
			i = j
		case c == '$' && i+1 < len(q) && (q[i+1] == '$' || isIdentStart(q[i+1])):
			// PostgreSQL dollar quoting: $tag$...$tag$; or a parameter $1.
			j := i + 1
			for j < len(q) && (isIdent(q[j])) {
				j++
			}
			if j < len(q) && q[j] == '$' {
				tag := q[i : j+1]
				end := strings.Index(q[j+1:], tag)
				if end < 0 {
					i = len(q)
				} else {
					i = j + 1 + end + len(tag)
				}
				emit("?")
			} else {
				emit("?")
				i = j
			}
		case c == '$' && i+1 < len(q) && isDigit(q[i+1]):
			j := i + 1
			for j < len(q) && isDigit(q[j]) {
				j++
			}
			emit("?")
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(q) && isDigit(q[i+1])):
			j := i
			if c == '0' && i+1 < len(q) && (q[i+1] == 'x' || q[i+1] == 'X') {
				j += 2
				for j < len(q) && isHex(q[j]) {
					j++
				}
			} else {
				for j < len(q) && (isDigit(q[j]) || q[j] == '.') {
					j++
				}
				if j < len(q) && (q[j] == 'e' || q[j] == 'E') {
					j++
					if j < len(q) && (q[j] == '+' || q[j] == '-') {
						j++
					}
					for j < len(q) && isDigit(q[j]) {
						j++
					}
				}
			}
			emit("?")
			i = j
		case isIdentStart(c):
			j := i
			for j < len(q) && isIdent(q[j]) {
				j++
			}
			emit(asciiLower(q[i:j]))
			i = j
		default:
			emit(q[i : i+1]) // the byte itself: string(c) would re-encode a non-ASCII byte
			i++
		}
	}
	return collapseLists(b.String())
}

// asciiLower lower-cases the ASCII letters of s and leaves every other
// byte as it is (servers fold unquoted identifiers so; strings.ToLower
// would also turn invalid UTF-8 into longer replacement characters).
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// skipQuoted returns the index just past the quoted text starting at q[i],
// honouring doubled quotes and backslash escapes.
func skipQuoted(q string, i int, quote byte) int {
	j := i + 1
	for j < len(q) {
		switch q[j] {
		case '\\':
			j += 2
			continue
		case quote:
			if j+1 < len(q) && q[j+1] == quote {
				j += 2
				continue
			}
			return j + 1
		}
		j++
	}
	return len(q)
}

// collapseLists turns "(?,?,?)" and "(?, ?)" into "(?)", and multi-row
// VALUES lists "(?),(?)" into "(?)".
func collapseLists(s string) string {
	for {
		t := strings.ReplaceAll(s, "? , ?", "?")
		t = strings.ReplaceAll(t, "?,?", "?")
		t = strings.ReplaceAll(t, "?, ?", "?")
		t = strings.ReplaceAll(t, "(?),(?)", "(?)")
		t = strings.ReplaceAll(t, "(?), (?)", "(?)")
		if t == s {
			return s
		}
		s = t
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

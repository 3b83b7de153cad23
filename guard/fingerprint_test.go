package guard

import "testing"

func TestFingerprint(t *testing.T) {
	cases := []struct{ in, want string }{
		{"SELECT * FROM t WHERE id = 42", "select * from t where id = ?"},
		{"select *  from t\n where id=7", "select * from t where id=?"},
		{"UPDATE accounts SET balance = balance + -12.5e3 WHERE aid = 3", "update accounts set balance = balance + -? where aid = ?"},
		{"SELECT 'it''s', \"Col\" FROM `T`", "select ?, \"Col\" from `T`"},
		{"select * from t where id in (1, 2, 3)", "select * from t where id in (?)"},
		{"insert into t values (1,'a'),(2,'b'), (3,'c')", "insert into t values (?)"},
		{"select $1, $$body$$, $q$x$q$ -- trailing\n from t /* c */ where x = 0xFF", "select ? from t where x = ?"},
		{"SELECT 'unterminated", "select ?"},
		{"", ""},
		{"select 'a\\'b' # mysql comment", "select ?"},
	}
	for _, c := range cases {
		if got := Fingerprint(c.in); got != c.want {
			t.Errorf("Fingerprint(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzFingerprint(f *testing.F) {
	f.Add("select * from t where id in (1,2,3) and s = 'x'")
	f.Add("$a$ $$ '")
	f.Fuzz(func(t *testing.T, q string) {
		fp := Fingerprint(q)
		if len(fp) > 2*len(q)+1 {
			t.Fatalf("fingerprint longer than twice the input: %q -> %q", q, fp)
		}
	})
}

// TestFingerprintKeepsNonASCIIBytes: bytes outside ASCII, valid UTF-8 or
// not, pass through unchanged (a fuzzer found "\xc4\xc4" turned into two
// replacement characters); only ASCII letters are folded.
func TestFingerprintKeepsNonASCIIBytes(t *testing.T) {
	for in, want := range map[string]string{
		"\xc4\xc4":                  "\xc4\xc4",
		"SELECT Größe FROM t":       "select größe from t",
		"select 'é' || É from t":    "select ? || É from t",
		"select \xff, 1 from T\x80": "select \xff, ? from t\x80",
	} {
		if got := Fingerprint(in); got != want {
			t.Errorf("Fingerprint(%q) = %q, want %q", in, got, want)
		}
	}
}

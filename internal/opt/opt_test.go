package opt

import "testing"

func TestSet(t *testing.T) {
	n := 5
	Set(&n, -1, false)
	if n != 5 {
		t.Errorf("invalid value: setting = %d, want the default 5", n)
	}
	Set(&n, 7, true)
	if n != 7 {
		t.Errorf("valid value: setting = %d, want 7", n)
	}
}

package enum

import "testing"

type color uint8

const (
	red color = iota + 1
	green
)

var colorNames = [...]string{red: "red", green: "green"}

func TestName(t *testing.T) {
	for _, c := range []struct {
		v    color
		want string
	}{{red, "red"}, {green, "green"}, {0, "color(0)"}, {3, "color(3)"}, {255, "color(255)"}} {
		if got := Name(c.v, colorNames[:], "color"); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestNameOr(t *testing.T) {
	for _, c := range []struct {
		v    color
		want string
	}{{red, "red"}, {green, "green"}, {0, "unknown"}, {3, "unknown"}} {
		if got := NameOr(c.v, colorNames[:], "unknown"); got != c.want {
			t.Errorf("NameOr(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

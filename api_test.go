package moirai_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
)

// No exported declaration taking or returning an internal type is checked
// by internal/apicheck, over every package of the module.

// TestTaskMethodSet keeps a task's method set to what an application calls:
// the runtime's entry points are functions of internal/taskx.
func TestTaskMethodSet(t *testing.T) {
	const most = 15
	typ := reflect.TypeFor[*moirai.Task]()
	if n := typ.NumMethod(); n > most {
		var names []string
		for i := range n {
			names = append(names, typ.Method(i).Name)
		}
		t.Errorf("*moirai.Task has %d exported methods, want at most %d: %s", n, most, strings.Join(names, ", "))
	}
}

package httpmw

import (
	"reflect"
	"testing"

	"github.com/moirai-go/moirai"
)

// TestSameButComparesEveryField: two specs that differ in any one field
// but the class are not the same to sameBut, so a lazy task never shares
// the spec of a task whose spec differs (a field added to moirai.Spec and
// not compared fails here). Goal is left out: a task's spec is
// normalized, its Goal its MaxDeferral.
func TestSameButComparesEveryField(t *testing.T) {
	var base moirai.Spec
	if !sameBut(&base, &base) {
		t.Fatal("a spec is not the same as itself")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		if typ.Field(i).Name == "Goal" {
			continue
		}
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(1)
		case reflect.Uint8:
			f.SetUint(1)
		case reflect.Float64:
			f.SetFloat(1)
		case reflect.Struct:
			f.Field(0).SetUint(1)
		default:
			t.Fatalf("field %s of kind %s: the test cannot change it", typ.Field(i).Name, f.Kind())
		}
		if got, want := sameBut(&other, &base), typ.Field(i).Name == "Class"; got != want {
			t.Errorf("specs differing in %s: sameBut %v, want %v", typ.Field(i).Name, got, want)
		}
	}
}

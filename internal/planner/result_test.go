package planner

import (
	"reflect"
	"testing"
)

// TestActsCoversEveryAction: a new action field of Result must make Acts
// true, or the controller would take a plan that acts for an idle one.
func TestActsCoversEveryAction(t *testing.T) {
	report := map[string]bool{"State": true, "Versions": true, "Ready": true, "Progressing": true, "Events": true,
		"RequeueAfter": true, "SkipDrainage": true}
	typ := reflect.TypeFor[Result]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var r Result
		field := reflect.ValueOf(&r).Elem().Field(i)
		switch field.Kind() {
		case reflect.Bool:
			field.SetBool(true)
		case reflect.Pointer:
			field.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			field.Set(reflect.MakeSlice(f.Type, 1, 1))
		default:
			if !report[f.Name] {
				t.Errorf("Result.%s has kind %s: teach this test to set it", f.Name, field.Kind())
			}
			continue
		}
		if r.Acts() == report[f.Name] {
			t.Errorf("Acts() = %v with only Result.%s set; status-only fields: %v", r.Acts(), f.Name, report)
		}
	}
}

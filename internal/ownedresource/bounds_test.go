package ownedresource

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// allocLimit is what rendering one object may allocate in these tests: a
// safety bound on the outcome, far above what the bounds let a template
// make, far below what the attacks would make without them.
const allocLimit = 64 << 20

// allocated renders obj and returns what that allocated in all.
func allocated(obj map[string]any) (error, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Render(obj, target)
	runtime.ReadMemStats(&after)
	return err, after.TotalAlloc - before.TotalAlloc
}

// doubling is a template that doubles a string in a variable n times with
// f, writing only its length: what the 1 MiB bound on output never saw.
func doubling(n int, f string) string {
	return `{{ $x := "ab" }}` + strings.Repeat(`{{ $x = `+f+` }}`, n) + `{{ len $x }}`
}

// TestRenderBoundsAttacks renders templates written to exhaust the
// controller's memory. Each fails, naming the value and the bound it
// breaks, and allocates less than allocLimit on the way.
func TestRenderBoundsAttacks(t *testing.T) {
	big := strings.Repeat("x", 60000)
	many := func(n int, value string) map[string]any {
		obj := map[string]any{"apiVersion": "v1", "kind": "X"}
		for i := range n {
			obj[fmt.Sprintf("v%05d", i)] = value
		}
		return obj
	}
	one := func(value string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "X", "data": map[string]any{"a": value}}
	}
	for _, tc := range []struct {
		name   string
		object map[string]any
		field  string // "" for spec.object.data.a
		want   string
		bound  bool // the error wraps ErrBound
	}{
		{name: "printf doubling into a variable 40 times", object: one(doubling(40, `printf "%s%s" $x $x`)),
			want: "print, printf and println may make at most 1048576 bytes for one object", bound: true},
		{name: "print doubling 40 times", object: one(doubling(40, `print $x $x`)),
			want: "print, printf and println may make at most 1048576 bytes", bound: true},
		{name: "println doubling 40 times", object: one(doubling(40, `println $x $x`)),
			want: "print, printf and println may make at most 1048576 bytes", bound: true},
		{name: "printf reusing one argument", object: one(`{{ $x := "` + big + `" }}{{ $y := printf "` + strings.Repeat("%[1]s", 100) + `" $x }}`),
			want: `"%[" is not a verb this printf supports`},
		{name: "printf of many arguments", object: one(`{{ $x := "` + big + `" }}{{ $y := printf "` + strings.Repeat("%q", 10) + `"` + strings.Repeat(" $x", 10) + ` }}`),
			want: "print, printf and println may make at most 1048576 bytes", bound: true},
		{name: "a width of a million", object: one(`{{ $x := printf "%0999999d" 1 }}`),
			want: "printf widths and precisions may be at most 100, not 999999", bound: true},
		{name: "a million widths of a million", object: one(`{{ $x := printf "` + strings.Repeat("%999999d", 1000) + `" 1 }}`),
			want: "may be at most 100, not 999999", bound: true},
		{name: "a precision of a million", object: one(`{{ printf "%.999999f" 1.5 }}`),
			want: "may be at most 100, not 999999", bound: true},
		{name: "a width from an argument", object: one(`{{ printf "%*d" 999999 1 }}`),
			want: `"%*" is not a verb this printf supports`},
		{name: "variables each holding what fits once", object: one(`{{ $x := "` + big + `" }}` + strings.Repeat(`{{ $y := printf "%s" $x }}`, 40)),
			want: "print, printf and println may make at most 1048576 bytes", bound: true},
		{name: "doubling spread over many values", object: many(40, doubling(15, `print $x $x`)),
			field: "spec.object.v00008", want: "print, printf and println may make at most 1048576 bytes", bound: true},
		{name: "html nested", object: one(`{{ $x := html (html (html (html (html (html (html (html "<>"))))))) }}`),
			want: `function "html" is not available`},
		{name: "js and urlquery", object: one(`{{ js (urlquery .BuildID) }}`), want: `function "js" is not available`},
		{name: "call", object: one(`{{ call .BuildID }}`), want: `function "call" is not available`},
		{name: "range over a large number", object: one(`{{ range 1000000000 }}{{ $x := printf "%s%s" "a" "b" }}{{ end }}`),
			want: "range is not supported"},
		{name: "range hidden in a with", object: one(`{{ with .BuildID }}{{ else }}{{ range 1000000000 }}x{{ end }}{{ end }}`),
			want: "range is not supported"},
		{name: "templates calling each other", object: one(`{{ define "a" }}{{ template "a" }}{{ template "a" }}{{ end }}{{ template "a" }}`),
			want: "define and block are not supported"},
		{name: "too many nodes", object: many(3000, `{{ .BuildID }}`), field: "spec.object.v02000",
			want: "the templates of one object may have at most 10000 parse nodes", bound: true},
		{name: "one long pipeline", object: one("{{ " + strings.Repeat(`len "a" | printf "%d" | `, 2000) + "len }}"),
			want: "at most 10000 parse nodes", bound: true},
		{name: "a template too long", object: one(big + big + "{{ .BuildID }}"),
			want: "a string holding a template may be at most 65536 bytes, not 120014", bound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, alloc := allocated(tc.object)
			field := tc.field
			if field == "" {
				field = "spec.object.data.a"
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %.500v\nwant one on %s holding %q", err, field, tc.want)
			}
			if errors.Is(err, ErrBound) != tc.bound {
				t.Errorf("errors.Is(err, ErrBound) = %v, want %v", !tc.bound, tc.bound)
			}
			if alloc > allocLimit {
				t.Errorf("rendering allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestRenderBoundsLeaveRealTemplates: templates people write stay far
// within the bounds, and what fits renders.
func TestRenderBoundsLeaveRealTemplates(t *testing.T) {
	u, err := Render(decode(t, `{"apiVersion":"v1","kind":"ConfigMap","data":{
		"a":"{{ printf \"%s/%s\" .TemporalNamespace .TemporalDeploymentName }}",
		"b":"{{ print .BuildID \"-\" 3 }}",
		"c":"{{ println .DeploymentName }}",
		"d":"{{ if and (ne .BuildID \"\") (lt (len .BuildID) 64) }}{{ slice .BuildID 0 2 }}{{ index .BuildID 0 }}{{ end }}",
		"e":"{{ printf \"%-8.3s|%08.3f|%x|%q|%v\" .BuildID 3.14159 \"ab\" \"c\" true }}",
		"f":"{{ $x := \"ab\" }}{{ $x = printf \"%s%s\" $x $x }}{{ $x = printf \"%s%s\" $x $x }}{{ $x }}"}}`), target)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "prod/shop/orders", "b": "v2-abc-3", "c": "orders-v2-abc\n", "d": "v2118",
		"e": `v2-     |0003.142|6162|"c"|true`, "f": "abababab"}
	if g, w := asJSON(t, u.Object["data"]), asJSON(t, want); g != w {
		t.Errorf("got  %s\nwant %s", g, w)
	}
	// Doubling 17 times makes 512 KiB in all: within the bound.
	if _, err := Render(map[string]any{"apiVersion": "v1", "kind": "X", "a": doubling(17, `printf "%s%s" $x $x`)}, target); err != nil {
		t.Errorf("doubling 17 times: %v", err)
	}
}

// TestPrintfBound: the bound is never below what fmt makes, for formats
// and arguments of every kind a template can pass.
func TestPrintfBound(t *testing.T) {
	data := Data{DeploymentName: "d\x00", BuildID: "\xff\xfe", TemporalNamespace: "ü", TemporalDeploymentName: "\U0010ffff"}
	args := []any{"", "\x00\xff\U0010ffffü\"", data, 1.7976931348623157e308, -9223372036854775808, uint8(255), true, nil, complex(-1e308, 1e308), 'x'}
	for _, format := range []string{
		"%s", "%q", "%+q", "%#q", "%x", "% x", "% #x", "%#X", "%v", "%+v", "%#v", "%T", "%d", "%100.100f", "%-100.100e", "%#100.100g",
		"%b", "%o", "%O", "%U", "%#U", "%c", "%p", "%%", "%5%%q", "%.100x", "%100s", "%#100q", "%w", "%5.q", "% -+#0100.100Z", "no verbs",
	} {
		for _, a := range args {
			for _, list := range [][]any{{a}, {a, a, a}, nil} {
				n, err := printfBound(format, list)
				if err != nil {
					t.Fatalf("printfBound(%q): %v", format, err)
				}
				if got := len(fmt.Sprintf(format, list...)); got > n {
					t.Errorf("printf %q with %#v made %d bytes, bound %d", format, list, got, n)
				}
			}
		}
	}
	// What fmt would read differently, or pad without bound, is refused.
	for _, format := range []string{"%*d", "%[1]d", "%.[1]d", "%5.", "%", "%é", "%!", "%0101d", "%.101f", "%99999999999999999999d"} {
		if _, err := printfBound(format, args); err == nil {
			t.Errorf("printfBound(%q) accepted it", format)
		}
	}
	for _, a := range args {
		n, _ := printBound([]any{a, a})
		if got := len(fmt.Sprint(a, a)); got > n {
			t.Errorf("print %#v made %d bytes, bound %d", a, got, n)
		}
	}
}

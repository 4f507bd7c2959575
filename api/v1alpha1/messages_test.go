package v1alpha1

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBoundMessage(t *testing.T) {
	cases := map[string]struct {
		s     string
		limit int
		want  string
	}{
		"fits":                      {"short", 5, "short"},
		"empty":                     {"", 0, ""},
		"cut with the note":         {strings.Repeat("a", 40), 30, strings.Repeat("a", 11) + "… (29 more bytes)"},
		"no cut inside é (2 bytes)": {strings.Repeat("é", 20), 30, strings.Repeat("é", 5) + "… (30 more bytes)"},
		"no cut inside 漢 (3 bytes)": {strings.Repeat("漢", 20), 30, strings.Repeat("漢", 3) + "… (51 more bytes)"},
		"no cut inside 🙂 (4 bytes)": {strings.Repeat("🙂", 20), 30, strings.Repeat("🙂", 2) + "… (72 more bytes)"},
		"no room for the note":      {strings.Repeat("漢", 20), 10, strings.Repeat("漢", 3)},
		"limit zero":                {"abc", 0, ""},
		"negative limit":            {"abc", -1, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := BoundMessage(c.s, c.limit); got != c.want {
				t.Errorf("BoundMessage(%q, %d) = %q, want %q", c.s, c.limit, got, c.want)
			}
		})
	}
}

// FuzzBoundMessage: the result fits, is valid UTF-8 when the input is, and
// starts with as much of the input as fits.
func FuzzBoundMessage(f *testing.F) {
	f.Add("ab漢🙂c", 9)
	f.Add(strings.Repeat("é", 100), 40)
	f.Add("\xff\xfe\xbf\xbf\xbf\xbf", 3)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit %= 1 << 16
		got := BoundMessage(s, limit)
		if len(s) <= limit {
			if got != s {
				t.Fatalf("%q changed though it fits in %d", s, limit)
			}
			return
		}
		if len(got) > max(limit, 0) {
			t.Fatalf("%d bytes, limit %d", len(got), limit)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("%q cut inside a character: %q", s, got)
		}
		kept, _, _ := strings.Cut(got, "… (")
		if !strings.HasPrefix(s, kept) || (utf8.ValidString(s) && limit-len(kept) >= len(omitted(len(s)))+utf8.UTFMax) {
			t.Fatalf("%q keeps %q of %q under limit %d", got, kept, s, limit)
		}
	})
}

func TestSetConditionBoundsTheMessage(t *testing.T) {
	var conds []metav1.Condition
	SetCondition(&conds, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "ApplyFailed",
		Message: strings.Repeat("ü", MaxConditionMessage)})
	m := conds[0].Message
	if len(m) > MaxConditionMessage || !utf8.ValidString(m) || !strings.HasSuffix(m, "… (32790 more bytes)") {
		t.Errorf("message of %d bytes ending %q", len(m), m[len(m)-30:])
	}
}

package v1alpha1

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxConditionMessage is the schema's limit on a condition's message
// (metav1.Condition: 32768 characters). A status patch with a longer one is
// refused as a whole, so nothing else it carries is recorded either.
const MaxConditionMessage = 32768

// MaxVersionMessage bounds a message kept per version (a TWOR copy's
// apply error, a gate's verdict): many of them share one status object,
// which the API server takes only up to its request size limit.
const MaxVersionMessage = 4096

// SetCondition sets c in conds as meta.SetStatusCondition does, its message
// bounded to MaxConditionMessage. Every status writer sets conditions with
// it, so no message, however long the error it quotes, can make the status
// unwritable.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	c.Message = BoundMessage(c.Message, MaxConditionMessage)
	return meta.SetStatusCondition(conds, c)
}

// BoundMessage is s if it has at most limit bytes; otherwise the longest
// prefix of s, cut between characters, that fits in limit bytes together
// with a note of how many bytes were left out (no note if limit leaves no
// room for one).
func BoundMessage(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	limit = max(limit, 0)
	// The note counts at most len(s) bytes: reserving room for that count
	// leaves enough whatever the cut.
	room := limit - len(omitted(len(s)))
	if room < 0 {
		return s[:characterStart(s, limit)]
	}
	cut := characterStart(s, room)
	return s[:cut] + omitted(len(s)-cut)
}

// characterStart is i, moved back to the start of the character it falls
// in; at most UTFMax-1 bytes back, so invalid UTF-8 cannot move it further.
func characterStart(s string, i int) int {
	for back := 0; back < utf8.UTFMax-1 && i > 0 && i < len(s) && !utf8.RuneStart(s[i]); back++ {
		i--
	}
	return i
}

func omitted(n int) string { return fmt.Sprintf("… (%d more bytes)", n) }

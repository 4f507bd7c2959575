package fuzzsrc

import (
	"bytes"
	"testing"
)

// TestSource pins how bytes decode: seeds in the fuzz tests rely on it.
func TestSource(t *testing.T) {
	s := New([]byte{7, 4, 5})
	if got := s.Intn(4); got != 3 {
		t.Errorf("Intn(4) of 7 = %d", got)
	}
	if s.Bool() {
		t.Errorf("Bool of 4 = true")
	}
	if got := Pick(s, "a", "b"); got != "b" {
		t.Errorf("Pick of 5 = %s", got)
	}
	if s.Byte() != 0 || s.Bool() {
		t.Errorf("an exhausted source reads other than zeros")
	}
}

// TestEachRandom pins the xorshift stream the random tests' seeds name.
func TestEachRandom(t *testing.T) {
	var got [][]byte
	EachRandom(t, 2463534242, 2, 3, func(data []byte) []error {
		got = append(got, bytes.Clone(data))
		return nil
	})
	if want := [][]byte{{0x63, 0x7a, 0xa0}, {0x7e, 0xe1, 0xea}}; len(got) != 2 || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Errorf("got %x", got)
	}
}

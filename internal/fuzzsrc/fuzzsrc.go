// Package fuzzsrc turns fuzz bytes into choices, for the fuzz tests'
// input generators. Only tests import it.
//
// A Source reads one byte a choice, in order, and zeros once the bytes
// run out, so every byte string decodes to an input and a seed's bytes
// keep their meaning as long as a generator draws in the same order.
package fuzzsrc

import "testing"

// Source reads choices from fuzz bytes.
type Source struct{ b []byte }

// New reads choices from data.
func New(data []byte) *Source { return &Source{b: data} }

// Byte is the next byte, or 0 once they are exhausted.
func (s *Source) Byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

// Intn is a number in [0, n).
func (s *Source) Intn(n int) int { return int(s.Byte()) % n }

// Bool is true for an odd byte.
func (s *Source) Bool() bool { return s.Byte()&1 == 1 }

// Pick is one of xs.
func Pick[T any](s *Source, xs ...T) T { return xs[s.Intn(len(xs))] }

// EachRandom runs check on n inputs of size bytes from an xorshift
// generator started at seed, so a fuzz target's invariants run in the
// normal test run too; it fails on the first error with the input's hex.
func EachRandom(t testing.TB, seed uint32, n, size int, check func(data []byte) []error) {
	t.Helper()
	data := make([]byte, size)
	for range n {
		for i := range data {
			seed ^= seed << 13
			seed ^= seed >> 17
			seed ^= seed << 5
			data[i] = byte(seed)
		}
		for _, err := range check(data) {
			t.Fatalf("input %x: %v", data, err)
		}
	}
}

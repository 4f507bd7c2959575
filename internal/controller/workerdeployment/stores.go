package workerdeployment

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// byTWD holds one entry per TWD: the stores of reads remember, look up and
// forget; freshness decides whether an entry stands.
type byTWD[E any] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]E
}

func (s *byTWD[E]) lookup(key types.NamespacedName) (E, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return e, ok
}

func (s *byTWD[E]) remember(key types.NamespacedName, e E) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName]E{}
	}
	s.m[key] = e
}

// update changes the TWD's entry, if it has one.
func (s *byTWD[E]) update(key types.NamespacedName, f func(E) E) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok {
		s.m[key] = f(e)
	}
}

func (s *byTWD[E]) forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

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

// byBuild holds, per TWD, one entry per version, for the stores that
// spare describing single versions.
type byBuild[V any] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]V
}

// lookup is build's entry, or the zero value.
func (s *byBuild[V]) lookup(key types.NamespacedName, build string) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key][build]
}

func (s *byBuild[V]) put(key types.NamespacedName, build string, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName]map[string]V{}
	}
	if s.m[key] == nil {
		s.m[key] = map[string]V{}
	}
	s.m[key][build] = v
}

// keep drops the TWD's entries for which stands is false, so that a store
// does not grow with entries no longer of use.
func (s *byBuild[V]) keep(key types.NamespacedName, stands func(build string, v V) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, v := range s.m[key] {
		if !stands(b, v) {
			delete(s.m[key], b)
		}
	}
}

func (s *byBuild[V]) forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

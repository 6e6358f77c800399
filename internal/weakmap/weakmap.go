// Package weakmap is a map whose values are held weakly: an entry goes
// once nothing else holds its value. The tables that let clients of many
// clusters share what they derived (restmapper.Indexes,
// openapi3.Documents) are such maps, so that what no cluster uses any more
// is not kept for ever.
package weakmap

import (
	"runtime"
	"sync"
	"weak"
)

// Map holds *V by K weakly. The zero value is an empty map, safe for
// concurrent use.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]weak.Pointer[V]
}

// Get returns the value held for k, or nil.
func (m *Map[K, V]) Get(k K) *V {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k].Value()
}

// Put holds v for k unless a value is held for k already, and returns the
// one held: the first of concurrent Puts wins.
func (m *Map[K, V]) Put(k K, v *V) *V {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held := m.m[k].Value(); held != nil {
		return held
	}
	if m.m == nil {
		m.m = map[K]weak.Pointer[V]{}
	}
	m.m[k] = weak.Make(v)
	runtime.AddCleanup(v, m.forget, k)
	return v
}

// Len counts the values held now.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.m {
		if p.Value() != nil {
			n++
		}
	}
	return n
}

// forget drops k's entry once its value is gone (a later Put may have
// held another value for k since).
func (m *Map[K, V]) forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.m[k]; ok && p.Value() == nil {
		delete(m.m, k)
	}
}

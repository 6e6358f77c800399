package restmapper

import (
	"runtime"
	"sync"
	"weak"
)

// Indexes is a table of the indexes mappers build from discovery, that the
// mappers given it (WithIndexes) share by snapshot generation: clients
// that share decoded discovery (discovery.Surfaces, as in a fleet) hand
// their mappers snapshots of one generation for one surface, so a thousand
// clusters of one surface cost one index. An index no mapper uses any more
// is forgotten. Warnings about ambiguous short names go to the warning
// handler of the mapper that built the index, once. It is safe for
// concurrent use.
type Indexes struct {
	mu sync.Mutex
	m  map[uint64]weak.Pointer[state]
}

// NewIndexes returns an empty table.
func NewIndexes() *Indexes { return &Indexes{m: map[uint64]weak.Pointer[state]{}} }

// Len is how many indexes the table holds now.
func (ix *Indexes) Len() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, p := range ix.m {
		if p.Value() != nil {
			n++
		}
	}
	return n
}

// WithIndexes shares the mapper's indexes through ix with the other
// mappers given it. Default: the mapper's own.
func WithIndexes(ix *Indexes) Option {
	return func(o *options) error { o.indexes = ix; return nil }
}

// get returns the table's state for gen, or nil.
func (ix *Indexes) get(gen uint64) *state {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.m[gen].Value()
}

// put holds st unless the table has a state for its generation already,
// and returns the one it holds.
func (ix *Indexes) put(st *state) *state {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if held := ix.m[st.generation].Value(); held != nil {
		return held
	}
	ix.m[st.generation] = weak.Make(st)
	runtime.AddCleanup(st, ix.forget, st.generation)
	return st
}

func (ix *Indexes) forget(gen uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if p, ok := ix.m[gen]; ok && p.Value() == nil {
		delete(ix.m, gen)
	}
}

package restmapper

import (
	"reflect"
	"sync"

	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/internal/weakmap"
)

// Indexes is a table of the indexes mappers build from discovery, that the
// mappers given it (WithIndexes) share by snapshot generation: clients
// that share decoded discovery (discovery.WithSurfaces, as in a fleet) hand
// their mappers snapshots of one generation for one surface, so a thousand
// clusters of one surface cost one index. An index no mapper uses any more
// is forgotten. Warnings about ambiguous short names go to the warning
// handler of the mapper that built the index, once. The table also holds
// once the options of the first mapper given it, which every later mapper
// given the same ones points at (package shared's identities). It is safe
// for concurrent use.
type Indexes struct {
	states weakmap.Map[uint64, state]

	mu   sync.Mutex
	opts *options // what mappers' options share (sharedOptions), once one was given
}

// sharedOptions is o, or the options of the table's first mapper when
// they are the same (the same interval, clock and table, and no warning
// handler: a function cannot be compared): package shared's identities of
// a server are given the same, and each mapper holds a pointer instead of
// its own copy (40 bytes, the Mapper a size class smaller). With no
// table, o.
func (ix *Indexes) sharedOptions(o *options) *options {
	if ix == nil {
		return o
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.opts == nil {
		ix.opts = o
	}
	s := ix.opts
	if s.missInterval == o.missInterval && s.indexes == o.indexes && s.warn == nil && o.warn == nil && sameClock(s.clock, o.clock) {
		return s
	}
	return o
}

// sameClock reports whether a and b are one clock: equal, and of a type
// that can be compared (== on another would panic).
func sameClock(a, b clock.PassiveClock) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && a == b
}

// NewIndexes returns an empty table.
func NewIndexes() *Indexes { return &Indexes{} }

// Len is how many indexes the table holds now.
func (ix *Indexes) Len() int { return ix.states.Len() }

// WithIndexes shares the mapper's indexes through ix with the other
// mappers given it. Default: the mapper's own.
func WithIndexes(ix *Indexes) Option {
	return named("WithIndexes", func(o *options) error { o.indexes = ix; return nil })
}

// get returns the table's state for gen, or nil.
func (ix *Indexes) get(gen uint64) *state { return ix.states.Get(gen) }

// put holds st unless the table has a state for its generation already,
// and returns the one it holds.
func (ix *Indexes) put(st *state) *state { return ix.states.Put(st.generation, st) }

package restmapper

import "github.com/kubeatlas/kubeatlas/internal/weakmap"

// Indexes is a table of the indexes mappers build from discovery, that the
// mappers given it (WithIndexes) share by snapshot generation: clients
// that share decoded discovery (discovery.WithSurfaces, as in a fleet) hand
// their mappers snapshots of one generation for one surface, so a thousand
// clusters of one surface cost one index. An index no mapper uses any more
// is forgotten. Warnings about ambiguous short names go to the warning
// handler of the mapper that built the index, once. It is safe for
// concurrent use.
type Indexes struct {
	states weakmap.Map[uint64, state]
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

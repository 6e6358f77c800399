package typed

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// A piece is one components/schemas entry converted to a
// structured-merge-diff type: what schemaconv.ToSchemaFromOpenAPI makes of
// it, which depends on the entry's name, its bytes and the
// preserve-unknown-fields flag alone (a $ref is kept as the name it
// names, resolved in the document that holds the type). Every
// group-version document repeats the io.k8s.apimachinery entries
// (ObjectMeta, ManagedFieldsEntry, Time, ...) byte for byte, so their
// pieces are parsed and converted once per content, not once per document.
type piece struct {
	def   smdschema.TypeDef         // Atom zero: nothing to insert (a top-level $ref)
	err   string                    // what the conversion reported, if anything
	kinds []schema.GroupVersionKind // its x-kubernetes-group-version-kind
	refs  []string                  // the named types def refers to
}

// pieceKey is what a piece is made of. sum is the SHA-256 of the entry's
// bytes: two documents' entries of one name share a piece only when their
// bytes are equal (a collision is not a risk a document's author can
// take), so an ObjectMeta that differs is a piece of its own.
type pieceKey struct {
	name     string
	sum      [sha256.Size]byte
	preserve bool
}

// pieces interns pieces across every document of the process, as
// unique.Make interns values: it holds each weakly, so a piece lives as
// long as a document's types use it (each document's types hold theirs)
// and its entry is dropped once none does. It never keeps memory alive by
// itself: its size is that of the pieces live documents hold, which the
// client's document limits bound. The lock is held for map operations
// alone, never while parsing or converting.
type piecePool struct {
	mu sync.Mutex
	m  map[pieceKey]weak.Pointer[piece]
}

// pool is the process's pieces. Package-level as unique's pool is: a
// piece is a function of its key, so sharing one across converters,
// clients and clusters changes no result, only what is computed again.
var pool = &piecePool{m: map[pieceKey]weak.Pointer[piece]{}}

// conversions counts the pieces parsed and converted, for the tests that
// pin "once per content".
var conversions atomicCounter

// get returns the piece of the entry name whose bytes are raw, parsing and
// converting it unless a live document's types hold it already. A body
// that does not parse is an error, not kept here (the document's types
// keep it: see kindType).
func (p *piecePool) get(name string, raw []byte, preserve bool) (*piece, error) {
	k := pieceKey{name: name, sum: sha256.Sum256(raw), preserve: preserve}
	p.mu.Lock()
	w, ok := p.m[k]
	p.mu.Unlock()
	if pc := w.Value(); ok && pc != nil {
		return pc, nil
	}
	pc, err := convertPiece(name, raw, preserve)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if first := p.m[k].Value(); first != nil {
		return first, nil // converted concurrently: everyone gets one
	}
	p.m[k] = weak.Make(pc)
	runtime.AddCleanup(pc, p.drop, k)
	return pc, nil
}

// drop forgets k once its piece is gone (unless a new one took its place).
func (p *piecePool) drop(k pieceKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.m[k]; ok && w.Value() == nil {
		delete(p.m, k)
	}
}

// convertPiece parses raw and converts it alone, with the code
// managedfields.NewTypeConverter runs on a whole map of schemas
// (schemaconv.ToSchemaFromOpenAPI), which converts each entry on its own:
// the result is the entry's type, or the messages it reported, followed
// by the two common types every conversion appends (left out here; the
// document's types append them once).
func convertPiece(name string, raw []byte, preserve bool) (*piece, error) {
	conversions.add()
	s := &spec.Schema{}
	// UnmarshalJSON directly, as openapi3.Document.Schema does.
	if err := s.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	pc := &piece{kinds: kubeOpenAPIKinds(s.Extensions)}
	ts, err := schemaconv.ToSchemaFromOpenAPI(map[string]*spec.Schema{name: s}, preserve)
	if err != nil {
		pc.err = err.Error()
		return pc, nil
	}
	if len(ts.Types) == len(commonTypes)+1 { // the entry's type, then the common ones
		pc.def = ts.Types[0]
	}
	pc.refs = namedRefs(pc.def.Atom, nil)
	return pc, nil
}

// commonTypes are the two types schemaconv appends to every conversion
// (the untyped atomic and deduced types its atoms refer to by name).
var commonTypes = func() []smdschema.TypeDef {
	ts, err := schemaconv.ToSchemaFromOpenAPI(map[string]*spec.Schema{}, false)
	if err != nil {
		panic(err) // converts nothing: cannot fail
	}
	return ts.Types
}()

// namedRefs appends the names a's type references name, inlined atoms
// walked, each once.
func namedRefs(a smdschema.Atom, out []string) []string {
	ref := func(tr smdschema.TypeRef) {
		if tr.NamedType == nil {
			out = namedRefs(tr.Inlined, out)
			return
		}
		for _, n := range out {
			if n == *tr.NamedType {
				return
			}
		}
		out = append(out, *tr.NamedType)
	}
	if a.Map != nil {
		for _, f := range a.Map.Fields {
			ref(f.Type)
		}
		ref(a.Map.ElementType)
	}
	if a.List != nil {
		ref(a.List.ElementType)
	}
	return out
}

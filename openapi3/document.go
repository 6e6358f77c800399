package openapi3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Document is one group-version's OpenAPI v3 document. It arrives indexed,
// not parsed: its components/schemas entries are parsed one at a time, the
// first time something asks for them (Schema, Kind), and the whole
// document only when OpenAPI is called. A Document is safe for concurrent
// use; what it returns is shared and must not be modified.
type Document struct {
	Path string // "apis/apps/v1"
	URL  string // the server-relative URL it was read from, with its ?hash=
	JSON []byte

	// st is what is derived from JSON, made on first use (a Document may
	// be a literal), and shared by the Documents of one content that
	// Documents (WithDocuments) hands to clusters at other URLs.
	st atomic.Pointer[docState]
}

// docState is what a Document derives from its JSON.
type docState struct {
	indexOnce sync.Once
	idx       docIndex // where each components/schemas entry (and the rest) lies
	indexErr  error

	mu     sync.Mutex // guards parsed and kinds; never held while parsing
	parsed map[string]*spec.Schema
	kinds  map[schema.GroupVersionKind]string

	once sync.Once
	full *spec3.OpenAPI
	err  error

	derivedMu sync.Mutex // guards derived; never held while building
	derived   map[any]*derivation
}

// derivation is one value Derived builds of a document.
type derivation struct {
	once sync.Once
	v    any
	err  error
}

// state returns d's derived state, making it on first use.
func (d *Document) state() *docState {
	if st := d.st.Load(); st != nil {
		return st
	}
	d.st.CompareAndSwap(nil, &docState{})
	return d.st.Load()
}

// at is d as read from another URL (the same content at another cluster's
// prefix), sharing what d derived.
func (d *Document) at(u string) *Document {
	if u == d.URL {
		return d
	}
	nd := &Document{Path: d.Path, URL: u, JSON: d.JSON}
	nd.st.Store(d.state())
	return nd
}

// NewDocument indexes a document's JSON, as the Client does with each
// document it reads; a body that is not one well-bracketed JSON object is
// an error (a *SyntaxError). The Document keeps body: do not modify it.
func NewDocument(path, url string, body []byte) (*Document, error) {
	return newDocument(path, url, body, nil)
}

// newDocument is NewDocument within lim (nil: no bounds but the index's
// own depth), over which it fails with a *LimitError.
func newDocument(path, url string, body []byte, lim *DocumentLimits) (*Document, error) {
	d := &Document{Path: path, URL: url, JSON: body}
	st := d.state()
	st.indexOnce.Do(func() {
		st.idx, st.indexErr = indexDocument(d.JSON, lim)
		switch {
		case errors.As(st.indexErr, new(*LimitError)):
			st.indexErr = fmt.Errorf("openapi3: %s: %w", d.Path, st.indexErr)
		case st.indexErr != nil:
			st.indexErr = fmt.Errorf("openapi3: %s is not a JSON document: %w", d.Path, st.indexErr)
		}
	})
	if st.indexErr != nil {
		return nil, st.indexErr
	}
	return d, nil
}

// index returns where the schemas lie, indexing on first use (a Document
// built as a literal is indexed then).
func (d *Document) index() (map[string]span, error) {
	idx, err := d.indexAll()
	return idx.schemas, err
}

// indexAll returns where the document's parts lie (see docIndex).
func (d *Document) indexAll() (docIndex, error) {
	st := d.state()
	st.indexOnce.Do(func() {
		st.idx, st.indexErr = indexDocument(d.JSON, nil)
		if st.indexErr != nil {
			st.indexErr = fmt.Errorf("openapi3: %s is not a JSON document: %w", d.Path, st.indexErr)
		}
	})
	return st.idx, st.indexErr
}

// raw is the bytes at, or nil for the zero span (a part the document lacks).
func (d *Document) raw(at span) []byte {
	if at == (span{}) {
		return nil
	}
	return d.JSON[at.start:at.end]
}

// wantType checks that a response's Content-Type is one of want.
func wantType(resp *http.Response, want ...string) error {
	ct := resp.Header.Get("Content-Type")
	if slices.Contains(want, mediaType(ct)) {
		return nil
	}
	return fmt.Errorf("%w: Content-Type %q, want %s", ErrContentType, ct, strings.Join(want, " or "))
}

// mediaType is the media type of a Content-Type, or of one of an Accept's
// elements, without its parameters. Not mime.ParseMediaType, which refuses
// ProtobufTypeDeprecated ("@" is not a token character): the type client-go
// asks for, and servers before Kubernetes 1.27 answer with.
func mediaType(s string) string {
	mt, _, _ := strings.Cut(s, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// ErrContentType is the cause of an error for a response of another
// content type than the one asked for.
var ErrContentType = errors.New("openapi3: unexpected content type")

// SchemaNames lists the document's components/schemas names, sorted (none
// for a document that does not index).
func (d *Document) SchemaNames() []string {
	schemas, _ := d.index()
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SchemaJSON returns the bytes of the components/schemas entry called name,
// as the document holds them (not parsed, nothing kept): for callers that
// parse or key entries themselves, as openapi3/typed keys what it builds
// of an entry by its content. The bytes are the document's: do not modify
// them. A name the document does not define is an ErrNotFound.
func (d *Document) SchemaJSON(name string) ([]byte, error) {
	schemas, err := d.index()
	if err != nil {
		return nil, err
	}
	at, ok := schemas[name]
	if !ok {
		return nil, fmt.Errorf("%w: schema %q in %s", ErrNotFound, name, d.Path)
	}
	return d.JSON[at.start:at.end:at.end], nil
}

// Schema returns the components/schemas entry called name, parsing it on
// first use. A name the document does not define is an ErrNotFound.
func (d *Document) Schema(name string) (*spec.Schema, error) {
	st := d.state()
	st.mu.Lock()
	s := st.parsed[name]
	st.mu.Unlock()
	if s != nil {
		return s, nil
	}
	raw, err := d.SchemaJSON(name)
	if err != nil {
		return nil, err
	}
	s = &spec.Schema{}
	// UnmarshalJSON directly: json.Unmarshal would first scan the bytes
	// once more to check them, which doubles the cost.
	if err := s.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("openapi3: %s: schema %q: %w", d.Path, name, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if first := st.parsed[name]; first != nil {
		return first, nil // parsed concurrently; everyone gets the same one
	}
	if st.parsed == nil {
		st.parsed = map[string]*spec.Schema{}
	}
	st.parsed[name] = s
	return s, nil
}

// Schemas parses every components/schemas entry not parsed yet, on as many
// goroutines as GOMAXPROCS, and returns them all by name: the map
// managedfields.NewTypeConverter takes, for server-side apply tooling. The
// map is the caller's; the schemas in it are shared.
func (d *Document) Schemas() (map[string]*spec.Schema, error) {
	if _, err := d.index(); err != nil {
		return nil, err
	}
	names := d.SchemaNames()
	out := make([]*spec.Schema, len(names))
	errs := make([]error, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				out[i], errs[i] = d.Schema(names[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	all := make(map[string]*spec.Schema, len(names))
	for i, name := range names {
		all[name] = out[i]
	}
	return all, nil
}

// gvkExtension is the extension by which a kind's schema names its kind.
const gvkExtension = "x-kubernetes-group-version-kind"

// kindSchema names the schema whose x-kubernetes-group-version-kind lists
// gvk, indexing the document's kinds on first use.
func (d *Document) kindSchema(gvk schema.GroupVersionKind) (string, error) {
	st := d.state()
	st.mu.Lock()
	kinds := st.kinds
	st.mu.Unlock()
	if kinds == nil {
		var err error
		if kinds, err = d.indexKinds(); err != nil {
			return "", err
		}
		st.mu.Lock()
		st.kinds = kinds
		st.mu.Unlock()
	}
	name, ok := kinds[gvk]
	if !ok {
		return "", fmt.Errorf("%w: no schema for %s in %s", ErrNotFound, gvk, d.Path)
	}
	return name, nil
}

// Kind finds the schema whose x-kubernetes-group-version-kind lists gvk.
// Where several do, the first by name wins.
func (d *Document) Kind(gvk schema.GroupVersionKind) (*Schema, error) {
	name, err := d.kindSchema(gvk)
	if err != nil {
		return nil, err
	}
	s, err := d.Schema(name)
	if err != nil {
		return nil, err
	}
	return &Schema{Name: name, Schema: s, doc: d}, nil
}

// indexKinds reads the extension of the schemas whose bytes mention it (a
// few a document), without parsing the rest of them, and maps each kind
// they list to its schema's name.
func (d *Document) indexKinds() (map[schema.GroupVersionKind]string, error) {
	schemas, err := d.index()
	if err != nil {
		return nil, err
	}
	kinds := map[schema.GroupVersionKind]string{}
	for _, name := range d.SchemaNames() {
		at := schemas[name]
		raw := d.JSON[at.start:at.end]
		if !bytes.Contains(raw, []byte(gvkExtension)) {
			continue
		}
		// A schema whose extension does not read is left out, so that one
		// broken schema does not hide every kind of its document; asking
		// for it by name reports what is wrong with it.
		list, err := memberOf(raw, gvkExtension)
		var gvks []struct{ Group, Version, Kind string }
		if err != nil || list == nil || json.Unmarshal(list, &gvks) != nil {
			continue
		}
		for _, g := range gvks {
			gvk := schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
			if _, taken := kinds[gvk]; !taken && g.Kind != "" {
				kinds[gvk] = name
			}
		}
	}
	return kinds, nil
}

// Derived returns what build makes of d, building it once per content:
// every Document of the same content (the copies a Documents table hands
// to the clusters of a fleet that serve it) returns the same value, and a
// new ?hash= is a new Document, built anew. key names the derivation, as a
// context key does (a value of the caller's own unexported type); build
// must be deterministic and must not call Derived of d with the same key.
// Its result, error included, is kept as long as d's content is; a panic
// in build is an error, kept too. Callers that ask for one key at once wait
// for one build. It is how openapi3/typed hangs its structured-merge-diff
// types off a document.
func (d *Document) Derived(key any, build func(*Document) (any, error)) (any, error) {
	st := d.state()
	st.derivedMu.Lock()
	e := st.derived[key]
	if e == nil {
		if st.derived == nil {
			st.derived = map[any]*derivation{}
		}
		e = &derivation{}
		st.derived[key] = e
	}
	st.derivedMu.Unlock()
	e.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				e.v, e.err = nil, fmt.Errorf("openapi3: %s: building %T: panic: %v", d.Path, key, r)
			}
		}()
		e.v, e.err = build(d)
	})
	return e.v, e.err
}

// OpenAPI parses the whole document into spec3 (once). It shares nothing
// with what Schema returns.
func (d *Document) OpenAPI() (*spec3.OpenAPI, error) {
	st := d.state()
	st.once.Do(func() {
		st.full = &spec3.OpenAPI{}
		if err := st.full.UnmarshalJSON(d.JSON); err != nil {
			st.full, st.err = nil, fmt.Errorf("openapi3: %s: %w", d.Path, err)
		}
	})
	return st.full, st.err
}

package typed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// Converter turns objects into structured-merge-diff typed values and back,
// with the schemas of each object's group-version document: built from
// that document alone, the first time a kind of it is asked for, and kept
// with the document (see the package documentation). It implements
// managedfields.TypeConverter. It is safe for concurrent use.
type Converter struct {
	client *openapi3.Client
	opts   options
	key    buildKey
}

var _ managedfields.TypeConverter = (*Converter)(nil)

// New returns a converter over c's documents.
func New(c *openapi3.Client, opts ...Option) (*Converter, error) {
	if c == nil {
		return nil, errors.New("typed: New needs an openapi3.Client")
	}
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Converter{client: c, opts: o, key: buildKey{preserveUnknownFields: o.preserveUnknownFields}}, nil
}

// buildKey names the types built of a document (openapi3.Document.Derived):
// one set per value of the preserve-unknown-fields flag.
type buildKey struct{ preserveUnknownFields bool }

// built is what a group-version's document makes: the kinds its schemas
// list, each typed on first use, and the pieces converted of its schemas
// so far (which keep them in the pool: see piecePool).
type built struct {
	doc      *openapi3.Document
	preserve bool
	kinds    map[schema.GroupVersionKind]*kindType // made by build, then only read
	// budget is how many types the kinds' own types may hold together
	// (twice the document's schemas) before the kinds typed next share
	// one type set of the whole document (wholeTypes): a document whose
	// many kinds each reach most of its schemas costs what its schemas
	// do, not their square.
	budget int

	mu     sync.Mutex // guards pieces and spent; never held while converting
	pieces map[string]*piece
	spent  int // types held by the kinds' own types

	wholeOnce sync.Once
	whole     *wholeTypes
	wholeErr  error
}

// wholeTypes are the types of every schema of a document, as
// managedfields' converter builds them, shared by the kinds typed once the
// budget is spent.
type wholeTypes struct {
	parser *typed.Parser
	broken map[string]bool // the schemas that reach one that does not convert
	errs   []string        // what those that do not convert reported
}

// kindType is one kind's type, made the first time it is asked for and
// kept, error included, as long as the document's types are.
type kindType struct {
	root string // the schema that lists the kind
	once sync.Once
	t    *typed.ParseableType
	err  error
}

// Type returns the structured-merge-diff type of gvk, built from the
// document of gvk's group-version (fetched, and built, on first use; again
// when the server gives it a new ?hash=). A kind the document held does
// not list makes the client read the root again, at most once a second
// (openapi3.Client.DocumentOf): a kind installed since is found at once. A
// kind no document lists, or a group-version the server has no document
// for, is an openapi3.ErrNotFound.
func (c *Converter) Type(ctx context.Context, gvk schema.GroupVersionKind) (*typed.ParseableType, error) {
	d, err := c.client.DocumentOf(ctx, gvk)
	if err != nil {
		return nil, err
	}
	v, err := d.Derived(c.key, c.key.build)
	if err != nil {
		return nil, err
	}
	b := v.(*built)
	k := b.kinds[gvk]
	if k == nil {
		return nil, fmt.Errorf("%w: no schema for %s in %s", openapi3.ErrNotFound, gvk, d.Path)
	}
	b.typeKind(k)
	return k.t, k.err
}

// typeKind makes k's type, once. A panic while typing (server data that
// schemaconv or the parser does not expect) is k's error, kept as any
// error is, as Document.Derived keeps a build's.
func (b *built) typeKind(k *kindType) {
	k.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				k.t, k.err = nil, fmt.Errorf("typed: %s: typing %s: panic: %v", b.doc.Path, k.root, r)
			}
		}()
		k.t, k.err = b.typeOf(k.root)
	})
}

// builds counts the documents built, for the tests that pin "once per
// content".
var builds atomicCounter

// build indexes the kinds d's schemas list. A group-version's v3 document
// is self-contained: every $ref (io.k8s.apimachinery's ObjectMeta and the
// rest) names one of its own components/schemas, so each kind is typed
// from d alone (typeOf).
func (k buildKey) build(d *openapi3.Document) (any, error) {
	builds.add()
	b := &built{doc: d, preserve: k.preserveUnknownFields, pieces: map[string]*piece{}, budget: 2 * len(d.SchemaNames())}
	kinds, err := b.indexKinds()
	if err != nil {
		return nil, err
	}
	b.kinds = kinds
	return b, nil
}

// piece is the piece of d's schema called name (see piecePool), or nil
// for a name d does not define.
func (b *built) piece(name string) (*piece, error) {
	b.mu.Lock()
	pc, ok := b.pieces[name]
	b.mu.Unlock()
	if ok {
		return pc, nil
	}
	raw, err := b.doc.SchemaJSON(name)
	if errors.Is(err, openapi3.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pc, err = pool.get(name, raw, b.preserve)
	if err != nil {
		return nil, fmt.Errorf("openapi3: %s: schema %q: %w", b.doc.Path, name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if first := b.pieces[name]; first != nil {
		return first, nil
	}
	b.pieces[name] = pc
	return pc, nil
}

// typeOf types the schema called root as managedfields.NewTypeConverter
// does (schemaconv.ToSchemaFromOpenAPI, then a typed.Parser), on the
// schemas root reaches rather than all of the document's: the same type,
// for a type names only the types it reaches. A schema that does not
// convert fails the kinds that reach it, not every kind of its document.
// Past the budget, the kind's type is the whole document's (wholeType).
func (b *built) typeOf(root string) (*typed.ParseableType, error) {
	b.mu.Lock()
	left := b.budget - b.spent
	b.mu.Unlock()
	reached := map[string]*piece{}
	for queue := []string{root}; len(queue) > 0; {
		if len(reached) > left {
			return b.wholeType(root)
		}
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if _, seen := reached[name]; seen {
			continue
		}
		pc, err := b.piece(name)
		if err != nil {
			return nil, err
		}
		reached[name] = pc
		if pc != nil {
			queue = append(queue, pc.refs...)
		}
	}
	names := make([]string, 0, len(reached))
	for n, pc := range reached {
		if pc != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var errs []string
	types := make([]smdschema.TypeDef, 0, len(names)+len(commonTypes))
	for _, n := range names {
		pc := reached[n]
		if pc.err != "" {
			errs = append(errs, pc.err)
		}
		if pc.def.Atom != (smdschema.Atom{}) {
			types = append(types, pc.def)
		}
	}
	if len(errs) > 0 {
		return nil, b.conversionError(errs)
	}
	b.mu.Lock()
	over := b.spent+len(types) > b.budget
	if !over {
		b.spent += len(types)
	}
	b.mu.Unlock()
	if over {
		return b.wholeType(root)
	}
	types = append(types, commonTypes...)
	parser := &typed.Parser{Schema: smdschema.Schema{Types: types}}
	t := parser.Type(root)
	return &t, nil
}

// wholeType is root's type among the types of every schema of the
// document, built once: what managedfields' converter builds, but for a
// schema that does not convert, which fails the kinds that reach it alone,
// as in typeOf.
func (b *built) wholeType(root string) (*typed.ParseableType, error) {
	b.wholeOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				b.whole, b.wholeErr = nil, fmt.Errorf("typed: %s: typing the whole document: panic: %v", b.doc.Path, r)
			}
		}()
		b.whole, b.wholeErr = b.wholeTypes()
	})
	if b.wholeErr != nil {
		return nil, b.wholeErr
	}
	if b.whole.broken[root] {
		return nil, b.conversionError(b.whole.errs)
	}
	t := b.whole.parser.Type(root)
	return &t, nil
}

// wholeTypes converts every schema of the document (each once per
// content, as typeOf does) and finds those that reach one that does not
// convert, through the schemas that refer to each.
func (b *built) wholeTypes() (*wholeTypes, error) {
	names := b.doc.SchemaNames()
	w := &wholeTypes{broken: map[string]bool{}}
	types := make([]smdschema.TypeDef, 0, len(names)+len(commonTypes))
	referrers := map[string][]string{}
	var queue []string
	for _, name := range names {
		pc, err := b.piece(name)
		if err != nil {
			return nil, err
		}
		if pc.def.Atom != (smdschema.Atom{}) {
			types = append(types, pc.def)
		}
		for _, r := range pc.refs {
			referrers[r] = append(referrers[r], name)
		}
		if pc.err != "" {
			w.errs = append(w.errs, pc.err)
			queue = append(queue, name)
		}
	}
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if w.broken[name] {
			continue
		}
		w.broken[name] = true
		queue = append(queue, referrers[name]...)
	}
	w.parser = &typed.Parser{Schema: smdschema.Schema{Types: append(types, commonTypes...)}}
	return w, nil
}

// maxErrors bounds the messages a conversion error repeats.
const maxErrors = 10

// conversionError is the error of a type whose schemas reported errs, as
// managedfields' converter words it.
func (b *built) conversionError(errs []string) error {
	more := ""
	if len(errs) > maxErrors {
		more = fmt.Sprintf("\n(and %d more)", len(errs)-maxErrors)
		errs = errs[:maxErrors]
	}
	return fmt.Errorf("typed: %s: failed to convert models to schema: %s%s", b.doc.Path, strings.Join(errs, "\n"), more)
}

// indexKinds maps each kind the schemas list in their
// x-kubernetes-group-version-kind to its schema, as managedfields'
// internal indexModels does (which is not exported: these few lines follow
// it, the extension read by kubeOpenAPIKinds). Where two schemas list one
// kind, the first by name wins (upstream: whichever its map gave last).
// Only the schemas whose bytes may name the extension are read
// (mayListKinds), and only their extension (listedKinds): a kind's schema
// is parsed when the kind is first asked for.
func (b *built) indexKinds() (map[schema.GroupVersionKind]*kindType, error) {
	kinds := map[schema.GroupVersionKind]*kindType{}
	for _, name := range b.doc.SchemaNames() {
		raw, err := b.doc.SchemaJSON(name)
		if err != nil {
			return nil, err
		}
		if !mayListKinds(raw) {
			continue
		}
		listed, ok := listedKinds(raw)
		if !ok {
			// Not JSON to encoding/json: parsed as upstream parses it,
			// which reports what is wrong with it.
			pc, err := b.piece(name)
			if err != nil {
				return nil, err
			}
			listed = pc.kinds
		}
		for _, gvk := range listed {
			if _, taken := kinds[gvk]; taken || gvk.Kind == "" {
				continue
			}
			kinds[gvk] = &kindType{root: name}
		}
	}
	return kinds, nil
}

// listedKinds reads the kinds a schema lists, as kube-openapi's parser
// and kubeOpenAPIKinds read them (the member named exactly so, its value
// decoded to JSON's Go types), without parsing the rest of the schema;
// ok is false for bytes encoding/json does not read as an object.
func listedKinds(raw []byte) (kinds []schema.GroupVersionKind, ok bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil, false
	}
	v, found := members[gvkExtension]
	if !found {
		return nil, true
	}
	var list any
	if json.Unmarshal(v, &list) != nil {
		return nil, false
	}
	return kubeOpenAPIKinds(spec.Extensions{gvkExtension: list}), true
}

// mayListKinds reports whether a schema's bytes may name the extension
// x-kubernetes-group-version-kind: they spell it, or they hold a \u
// escape, which could spell it too. (kube-openapi keeps an extension's
// name as given, and managedfields looks it up in lower case, so another
// case lists no kind.) Most schemas do neither and are not parsed to index
// kinds.
func mayListKinds(raw []byte) bool {
	return bytes.Contains(raw, []byte(gvkExtension)) || bytes.Contains(raw, []byte(`\u`))
}

const gvkExtension = "x-kubernetes-group-version-kind"

// kubeOpenAPIKinds reads x-kubernetes-group-version-kind as managedfields'
// internal parseGroupVersionKind does: a list of maps whose group, version
// and kind are all strings; other entries are skipped.
func kubeOpenAPIKinds(ext spec.Extensions) []schema.GroupVersionKind {
	list, ok := ext["x-kubernetes-group-version-kind"].([]any)
	if !ok {
		return nil
	}
	var out []schema.GroupVersionKind
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		g, gok := m["group"].(string)
		v, vok := m["version"].(string)
		k, kok := m["kind"].(string)
		if gok && vok && kok {
			out = append(out, schema.GroupVersionKind{Group: g, Version: v, Kind: k})
		}
	}
	return out
}

// ObjectToTyped converts obj (an *unstructured.Unstructured, or a typed
// object of client-go's scheme) into a typed value of its kind's type, as
// managedfields' converter does. A kind without a schema gets the error
// managedfields' own converter gives, which the field manager's version
// converter recognises (it skips managed fields of versions the server no
// longer serves). An object the kind's type refuses (a field it does not
// declare, a value of another type) may be one of a schema changed since
// the document was read: the root is read again, as for a kind the
// document lacks (at most once a second, openapi3.Client.Changed), and
// the object converted again with the new document's type when the
// server gives one. Fetching the document is bounded by WithTimeout.
func (c *Converter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	ctx := newLazyTimeout(c.opts.timeout)
	defer ctx.stop()
	t, err := c.Type(ctx, gvk)
	if errors.Is(err, openapi3.ErrNotFound) {
		return nil, noCorrespondingType(gvk)
	}
	if err != nil {
		return nil, err
	}
	convert := func(t *typed.ParseableType) (*typed.TypedValue, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return t.FromUnstructured(u.UnstructuredContent(), opts...)
		}
		return t.FromStructured(obj, opts...)
	}
	v, err := convert(t)
	if err == nil {
		return v, nil
	}
	if newer := c.newerType(ctx, gvk, t); newer != nil {
		return convert(newer)
	}
	return nil, err
}

// newerType is gvk's type once the root is read again (Client.Changed:
// unless it was read within a second), if the server now gives gvk a
// schema other than t's; else nil. It is how an object that t refuses is
// tried against a schema changed since (a field added to a CRD), on the
// same bounded schedule as a kind the document lacks.
func (c *Converter) newerType(ctx context.Context, gvk schema.GroupVersionKind, t *typed.ParseableType) *typed.ParseableType {
	c.client.Changed()
	newer, err := c.Type(ctx, gvk)
	if err != nil || newer == t {
		return nil
	}
	return newer
}

// TypedToObject converts a typed value into an *unstructured.Unstructured,
// as managedfields' converter does.
func (c *Converter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return valueToObject(v.AsValue())
}

// valueToObject is managedfields' internal valueToObject.
func valueToObject(val value.Value) (runtime.Object, error) {
	vu := val.Unstructured()
	switch o := vu.(type) {
	case map[string]any:
		return &unstructured.Unstructured{Object: o}, nil
	default:
		return nil, fmt.Errorf("failed to convert value to unstructured for type %T", vu)
	}
}

// empty is a managedfields converter of no schemas: its ObjectToTyped
// returns, for any kind, managedfields' internal "no corresponding type"
// error, which the field manager's version converter tells from others by
// its type (not through errors.As), so it cannot be wrapped or remade.
var empty, _ = managedfields.NewTypeConverter(map[string]*spec.Schema{}, false)

func noCorrespondingType(gvk schema.GroupVersionKind) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	_, err := empty.ObjectToTyped(u)
	return err
}

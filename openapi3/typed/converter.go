package typed

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/schemaconv"
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

// built is what a group-version's document makes: its structured-merge-diff
// types, and the type of each kind its schemas list.
type built struct {
	kinds map[schema.GroupVersionKind]*typed.ParseableType
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
	t := v.(*built).kinds[gvk]
	if t == nil {
		return nil, fmt.Errorf("%w: no schema for %s in %s", openapi3.ErrNotFound, gvk, d.Path)
	}
	return t, nil
}

// builds counts the documents built, for the tests that pin "once per
// content".
var builds atomicCounter

// build makes d's types with the code managedfields.NewTypeConverter runs
// on the schemas it is given (schemaconv.ToSchemaFromOpenAPI, a
// typed.Parser), on this one document's schemas: a group-version's v3
// document is self-contained, every $ref (io.k8s.apimachinery's ObjectMeta
// and the rest) naming one of its own components/schemas.
func (k buildKey) build(d *openapi3.Document) (any, error) {
	builds.add()
	schemas, err := d.Schemas()
	if err != nil {
		return nil, err
	}
	ts, err := schemaconv.ToSchemaFromOpenAPI(schemas, k.preserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("typed: %s: failed to convert models to schema: %w", d.Path, err)
	}
	parser := &typed.Parser{Schema: smdschema.Schema{Types: ts.Types}}
	return &built{kinds: indexKinds(parser, schemas)}, nil
}

// indexKinds maps each kind the schemas list in their
// x-kubernetes-group-version-kind to its schema's type, as managedfields'
// internal indexModels does (which is not exported: these few lines follow
// it, the extension read by kubeOpenAPIKinds). Where two schemas list one
// kind, the first by name wins (upstream: whichever its map gave last).
func indexKinds(p *typed.Parser, schemas map[string]*spec.Schema) map[schema.GroupVersionKind]*typed.ParseableType {
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	kinds := map[schema.GroupVersionKind]*typed.ParseableType{}
	for _, name := range names {
		for _, gvk := range kubeOpenAPIKinds(schemas[name].Extensions) {
			if _, taken := kinds[gvk]; taken || gvk.Kind == "" {
				continue
			}
			t := p.Type(name)
			kinds[gvk] = &t
		}
	}
	return kinds
}

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

package typed

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// PatchMeta returns the strategic-merge-patch metadata of gvk that
// kubectl's client-side apply reads from OpenAPI v3: a
// strategicpatch.PatchMetaFromOpenAPIV3 of the kind's schema, its $refs
// resolved among the schemas of its group-version's document (fetched on
// first use, each schema parsed once per document content). Pass it to
// strategicpatch.CreateThreeWayMergePatch.
//
// PatchMeta answers for any kind with a schema, CRDs included, but a
// strategic merge patch is only for kinds whose PATCH accepts one:
// kubectl's apply sends one when the group-version document's PATCH
// operation for the kind lists application/strategic-merge-patch+json
// among its request body's content types, and a JSON merge patch
// (jsonmergepatch.CreateThreeWayJSONMergePatch) otherwise, which is what
// CRDs and most aggregated APIs accept (their servers refuse a strategic
// merge patch with 415 Unsupported Media Type). Callers decide so too.
//
// The metadata is checked first, on every schema strategicpatch can reach
// from the kind's: a kind whose metadata would make strategicpatch panic
// (it type-asserts the extensions and follows items unchecked) is an
// ErrPatchMeta, naming the field, instead (see checkPatchMeta).
//
// A kind the held document lacks reads the root again, as Type does
// (openapi3.Client.DocumentOf); a kind no document lists is an
// openapi3.ErrNotFound. A field the answer's schema lacks, when
// strategicpatch looks it up (a patch that sets a list the server's
// schema gained since the document was read), is tried once more in the
// group-version's document once the root is read again, as ObjectToTyped
// tries an object its type refuses (openapi3.Client.Changed: at most once
// a second, bounded by WithTimeout): with the new document's merge keys
// and strategies where the server gives one, where strategicpatch would
// fail with "unable to find api field".
func (c *Converter) PatchMeta(ctx context.Context, gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
	d, err := c.client.DocumentOf(ctx, gvk)
	if err != nil {
		return nil, err
	}
	m, err := checkedPatchMeta(d, gvk)
	if err != nil {
		return nil, err
	}
	return &patchMeta{meta: m, doc: d, kind: &patchKind{conv: c, gvk: gvk}}, nil
}

// checkedPatchMeta is the metadata of gvk's schema in d, checked.
func checkedPatchMeta(d *openapi3.Document, gvk schema.GroupVersionKind) (strategicpatch.PatchMetaFromOpenAPIV3, error) {
	none := strategicpatch.PatchMetaFromOpenAPIV3{}
	k, err := d.Kind(gvk)
	if err != nil {
		return none, err
	}
	all, err := d.Derived(schemaListKey{}, func(d *openapi3.Document) (any, error) {
		m, err := d.Schemas()
		return m, err
	})
	if err != nil {
		return none, err
	}
	list := all.(map[string]*spec.Schema)
	// Checked once per kind's schema and document content.
	if _, err := d.Derived(patchCheckKey{k.Name}, func(*openapi3.Document) (any, error) {
		return nil, checkPatchMeta(list, k.Schema)
	}); err != nil {
		return none, fmt.Errorf("typed: %s in %s: %w", gvk, d.Path, err)
	}
	return strategicpatch.PatchMetaFromOpenAPIV3{SchemaList: list, Schema: k.Schema}, nil
}

// patchMeta is PatchMeta's answer, and what its lookups return: the
// metadata strategicpatch reads (meta, at one schema of doc), and how it
// was reached from the kind's schema (the lookup of key, as a struct's
// field or a list's, in parent), so that a field meta lacks can be looked
// up at the same place in a newer document. One allocation a lookup.
type patchMeta struct {
	meta   strategicpatch.PatchMetaFromOpenAPIV3
	doc    *openapi3.Document
	kind   *patchKind
	parent *patchMeta // nil at the kind's schema
	key    string
	slice  bool
}

// patchKind is what every patchMeta of one PatchMeta answer shares: the
// kind, and the converter whose client reads its document again.
type patchKind struct {
	conv *Converter
	gvk  schema.GroupVersionKind
}

var _ strategicpatch.LookupPatchMeta = (*patchMeta)(nil)

func (p *patchMeta) LookupPatchMetadataForStruct(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	return p.lookup(key, false)
}

func (p *patchMeta) LookupPatchMetadataForSlice(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	return p.lookup(key, true)
}

func (p *patchMeta) Name() string { return p.meta.Name() }

// lookup is strategicpatch's lookup of key in p's schema, tried once more
// in a newer document when p's schema lacks key (strategicpatch's
// "unable to find api field"), and newer finds one that may have it.
func (p *patchMeta) lookup(key string, slice bool) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	l, m, err := p.lookupHere(key, slice)
	if err == nil || !p.lacks(key) {
		return l, m, err
	}
	if newer := p.newer(); newer != nil {
		if nl, nm, nerr := newer.lookupHere(key, slice); nerr == nil {
			return nl, nm, nil
		}
	}
	return l, m, err
}

// lookupHere is strategicpatch's lookup of key in p's schema, its answer
// wrapped to carry on the way it was reached.
func (p *patchMeta) lookupHere(key string, slice bool) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	var (
		l   strategicpatch.LookupPatchMeta
		m   strategicpatch.PatchMeta
		err error
	)
	if slice {
		l, m, err = p.meta.LookupPatchMetadataForSlice(key)
	} else {
		l, m, err = p.meta.LookupPatchMetadataForStruct(key)
	}
	next, ok := l.(strategicpatch.PatchMetaFromOpenAPIV3)
	if err != nil || !ok || next.Schema == nil {
		// As strategicpatch answers: a failed lookup's value is unused,
		// and one of no schema is its zero value.
		return l, m, err
	}
	return &patchMeta{meta: next, doc: p.doc, kind: p.kind, parent: p, key: key, slice: slice}, m, nil
}

// lacks says whether p's schema does not have key, where strategicpatch
// looks for it (a field of a schema it has, not one of no schema, which
// strategicpatch takes for no metadata at all).
func (p *patchMeta) lacks(key string) bool {
	if p.meta.Schema == nil {
		return false
	}
	_, ok := p.meta.Schema.Properties[key]
	return !ok
}

// newer is p's place in the group-version's document once the root is
// read again (openapi3.Client.Changed, as ObjectToTyped's newerType: at
// most once a second), if the server gives another document than p's
// and it has that place; else nil. The new document's metadata is checked
// as PatchMeta checks it.
func (p *patchMeta) newer() *patchMeta {
	conv, gvk := p.kind.conv, p.kind.gvk
	ctx := newLazyTimeout(conv.opts.timeout)
	defer ctx.stop()
	conv.client.Changed()
	d, err := conv.client.DocumentOf(ctx, gvk)
	if err != nil || d == p.doc {
		return nil
	}
	m, err := checkedPatchMeta(d, gvk)
	if err != nil {
		return nil
	}
	var steps []*patchMeta
	for s := p; s.parent != nil; s = s.parent {
		steps = append(steps, s)
	}
	cur := &patchMeta{meta: m, doc: d, kind: p.kind}
	for i := len(steps) - 1; i >= 0; i-- {
		l, _, err := cur.lookupHere(steps[i].key, steps[i].slice)
		next, ok := l.(*patchMeta)
		if err != nil || !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// schemaListKey names a document's schemas by name, kept for PatchMeta
// (PatchMetaFromOpenAPIV3 reads them, never writes).
type schemaListKey struct{}

// patchCheckKey names checkPatchMeta's verdict on a kind's schema.
type patchCheckKey struct{ name string }

// ErrPatchMeta is the cause of PatchMeta's error for a kind whose
// strategic-merge-patch metadata strategicpatch cannot use.
var ErrPatchMeta = errors.New("strategic-merge-patch metadata strategicpatch cannot use")

// The extensions strategicpatch reads, and the strategies it knows.
const (
	mergeKeyExtension = "x-kubernetes-patch-merge-key"
	strategyExtension = "x-kubernetes-patch-strategy"
)

var strategies = map[string]bool{"merge": true, "replace": true, "retainKeys": true}

// checkPatchMeta checks every schema strategicpatch's
// PatchMetaFromOpenAPIV3 may reach from root, as its meta.go walks them:
// a property (traverse), then its items' schema for a list, then the
// first allOf and the $ref among list (resolve). Where meta.go would
// panic, or hand CreateThreeWayMergePatch metadata it panics on, it is an
// error:
//   - x-kubernetes-patch-merge-key or -patch-strategy that is not a string
//     (meta.go's f.(string));
//   - a strategy other than merge, replace and retainKeys;
//   - items that are a tuple or empty (meta.go takes Items.Schema and
//     dereferences it);
//   - a merge key that is not a property of the list's elements (its
//     items, or the property itself where it has none, as meta.go reads
//     it), or is one whose type is not a string, integer, number or
//     boolean: patch.go compares merge key values with ==, which panics
//     on maps and lists.
//
// A $ref that does not resolve is left to meta.go, which returns an error.
func checkPatchMeta(list map[string]*spec.Schema, root *spec.Schema) error {
	seen := map[*spec.Schema]bool{}
	var walk func(s *spec.Schema, path string) error
	walk = func(s *spec.Schema, path string) error {
		if s == nil || seen[s] {
			return nil
		}
		seen[s] = true
		for name, p := range s.Properties {
			field := path + "." + name
			if err := checkProperty(list, &p); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrPatchMeta, strings.TrimPrefix(field, "."), err)
			}
			// As a struct's field, then as a list's.
			if err := walk(resolve(list, &p), field); err != nil {
				return err
			}
			if p.Items != nil {
				if err := walk(resolve(list, p.Items.Schema), field+"[]"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, "")
}

// checkProperty checks one property's extensions and items.
func checkProperty(list map[string]*spec.Schema, p *spec.Schema) error {
	if p.Items != nil && p.Items.Schema == nil {
		return errors.New("items that are not one schema")
	}
	if v, ok := p.Extensions[strategyExtension]; ok {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s is a %T, not a string", strategyExtension, v)
		}
		for st := range strings.SplitSeq(s, ",") {
			if !strategies[st] {
				return fmt.Errorf("%s %q: unknown strategy %q", strategyExtension, s, st)
			}
		}
	}
	v, ok := p.Extensions[mergeKeyExtension]
	if !ok {
		return nil
	}
	key, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s is a %T, not a string", mergeKeyExtension, v)
	}
	if key == "" {
		return nil // no merge key, to strategicpatch
	}
	// The schema of a list's elements, as meta.go's slice lookup finds it:
	// the items', or (a property without items, upstream's own test data
	// puts a merge key on a struct) the property's own.
	items := resolve(list, p)
	if p.Items != nil {
		items = resolve(list, p.Items.Schema)
	}
	if items == nil {
		return fmt.Errorf("%s %q: the elements' schema does not resolve", mergeKeyExtension, key)
	}
	kp, ok := items.Properties[key]
	if !ok {
		return fmt.Errorf("%s %q is not a property of the items", mergeKeyExtension, key)
	}
	k := resolve(list, &kp)
	if k == nil || len(k.Type) != 1 || !scalar[k.Type[0]] {
		return fmt.Errorf("%s %q is not a string, integer, number or boolean", mergeKeyExtension, key)
	}
	return nil
}

var scalar = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true}

// resolve is meta.go's resolve: the first allOf, then the $ref among list
// (nil when it names none).
func resolve(list map[string]*spec.Schema, s *spec.Schema) *spec.Schema {
	if s == nil {
		return nil
	}
	if len(s.AllOf) > 0 {
		s = &s.AllOf[0]
	}
	if ref := s.Ref.String(); ref != "" {
		return list[strings.TrimPrefix(ref, "#/components/schemas/")]
	}
	return s
}

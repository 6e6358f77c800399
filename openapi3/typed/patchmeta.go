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
// openapi3.ErrNotFound.
func (c *Converter) PatchMeta(ctx context.Context, gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
	d, err := c.client.DocumentOf(ctx, gvk)
	if err != nil {
		return nil, err
	}
	k, err := d.Kind(gvk)
	if err != nil {
		return nil, err
	}
	all, err := d.Derived(schemaListKey{}, func(d *openapi3.Document) (any, error) {
		m, err := d.Schemas()
		return m, err
	})
	if err != nil {
		return nil, err
	}
	list := all.(map[string]*spec.Schema)
	// Checked once per kind's schema and document content.
	if _, err := d.Derived(patchCheckKey{k.Name}, func(*openapi3.Document) (any, error) {
		return nil, checkPatchMeta(list, k.Schema)
	}); err != nil {
		return nil, fmt.Errorf("typed: %s in %s: %w", gvk, d.Path, err)
	}
	return strategicpatch.PatchMetaFromOpenAPIV3{SchemaList: list, Schema: k.Schema}, nil
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

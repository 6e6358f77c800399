package typed

import (
	"context"

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
	return strategicpatch.PatchMetaFromOpenAPIV3{SchemaList: all.(map[string]*spec.Schema), Schema: k.Schema}, nil
}

// schemaListKey names a document's schemas by name, kept for PatchMeta
// (PatchMetaFromOpenAPIV3 reads them, never writes).
type schemaListKey struct{}

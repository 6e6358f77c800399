package typed

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// PatchMeta returns the strategic-merge-patch metadata of gvk that
// kubectl's client-side apply reads from OpenAPI v3: a
// strategicpatch.PatchMetaFromOpenAPIV3 of the kind's schema, its $refs
// resolved among the schemas of its group-version's document (fetched on
// first use, each schema parsed once per document content). Pass it to
// strategicpatch.CreateThreeWayMergePatch. kubectl uses it only for kinds
// whose PATCH accepts application/strategic-merge-patch+json (not CRDs);
// for the others it sends a JSON merge patch. A kind the document does not
// list is an openapi3.ErrNotFound.
func (c *Converter) PatchMeta(ctx context.Context, gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
	d, err := c.client.Document(ctx, mediatype.OpenAPIPath(gvk.Group, gvk.Version))
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

package typed

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// Extractor extracts what a field manager applied to an object: client-go's
// applyconfigurations/meta/v1.UnstructuredExtractor, on the Converter's
// per-group-version types instead of the whole OpenAPI v2 document parsed
// again every minute. Its types are the Converter's: client-go's extractor
// builds its own with preserve-unknown-fields false, so pass
// WithPreserveUnknownFields(true) to New only if extraction should keep
// fields the schemas do not declare. It is safe for concurrent use.
type Extractor struct{ c *Converter }

var _ metav1ac.UnstructuredExtractor = (*Extractor)(nil)

// Extractor returns an extractor on c's types.
func (c *Converter) Extractor() *Extractor { return &Extractor{c: c} }

// Extract returns the fields of u that fieldManager owns through apply (its
// managedFields entry of operation Apply, not a subresource's), with u's
// apiVersion, kind, name and namespace: what the manager would apply to
// keep them, as client-go's extractor returns it (managedfields.ExtractInto).
// An object the kind's type refuses is tried again against a schema
// changed since, as by Converter.ObjectToTyped. Fetching the document is
// bounded by WithTimeout.
func (e *Extractor) Extract(u *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return e.extract(u, fieldManager, "")
}

// ExtractStatus is Extract of what fieldManager applied to the status
// subresource.
func (e *Extractor) ExtractStatus(u *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return e.extract(u, fieldManager, "status")
}

// extract is client-go's extractUnstructured, but a kind without a schema
// is an error where client-go's dereferences a nil type.
func (e *Extractor) extract(u *unstructured.Unstructured, fieldManager, subresource string) (*unstructured.Unstructured, error) {
	gvk := u.GetObjectKind().GroupVersionKind()
	ctx := newLazyTimeout(e.c.opts.timeout)
	defer ctx.stop()
	t, err := e.c.Type(ctx, gvk)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch the objectType: %w", err)
	}
	result := &unstructured.Unstructured{}
	if err := managedfields.ExtractInto(u, *t, fieldManager, result, subresource); err != nil { //nolint:forbidigo // as client-go's extractor
		// An object the type refuses may be of a schema changed since
		// (ObjectToTyped, newerType).
		newer := e.c.newerType(ctx, gvk, t)
		if newer == nil {
			return nil, fmt.Errorf("failed calling ExtractInto for unstructured: %w", err)
		}
		result = &unstructured.Unstructured{}
		if err := managedfields.ExtractInto(u, *newer, fieldManager, result, subresource); err != nil { //nolint:forbidigo // as client-go's extractor
			return nil, fmt.Errorf("failed calling ExtractInto for unstructured: %w", err)
		}
	}
	result.SetName(u.GetName())
	result.SetNamespace(u.GetNamespace())
	result.SetKind(u.GetKind())
	result.SetAPIVersion(u.GetAPIVersion())
	return result, nil
}

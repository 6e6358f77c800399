package typed

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
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
	result, err := extractInto(u, *t, fieldManager, subresource)
	if err != nil {
		// An object the type refuses may be of a schema changed since
		// (ObjectToTyped, newerType).
		newer := e.c.newerType(ctx, gvk, t)
		if newer == nil {
			return nil, fmt.Errorf("failed calling ExtractInto for unstructured: %w", err)
		}
		if result, err = extractInto(u, *newer, fieldManager, subresource); err != nil {
			return nil, fmt.Errorf("failed calling ExtractInto for unstructured: %w", err)
		}
	}
	result.SetName(u.GetName())
	result.SetNamespace(u.GetNamespace())
	result.SetKind(u.GetKind())
	result.SetAPIVersion(u.GetAPIVersion())
	return result, nil
}

// extractInto is managedfields.ExtractInto into a new Unstructured, step
// for step, but for its last: ExtractInto copies what it extracted into the
// Unstructured through JSON (encoding/json's Marshal, then
// Unstructured.UnmarshalJSON), a fifth of an extract's cost; this copies
// it directly to what that round trip gives (copyAsJSON), and takes the
// round trip only for values it does not copy so.
func extractInto(u *unstructured.Unstructured, t typed.ParseableType, fieldManager, subresource string) (*unstructured.Unstructured, error) {
	typedObj, err := t.FromUnstructured(u.Object)
	if err != nil {
		return nil, fmt.Errorf("error converting obj to typed: %w", err)
	}
	result := &unstructured.Unstructured{}
	var entry *metav1.ManagedFieldsEntry
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == subresource {
			entry = &mf
			break
		}
	}
	if entry == nil {
		return result, nil
	}
	fieldset := &fieldpath.Set{}
	if err := fieldset.FromJSON(entry.FieldsV1.GetRawReader()); err != nil {
		return nil, fmt.Errorf("error marshalling FieldsV1 to JSON: %w", err)
	}
	v := typedObj.ExtractItems(fieldset.Leaves()).AsValue().Unstructured()
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("unable to convert managed fields for %s to unstructured, expected map, got %T", fieldManager, v)
	}
	// set the type meta manually if it doesn't exist to avoid missing kind errors
	// when decoding from unstructured JSON (as ExtractInto does)
	if _, ok := m["kind"]; !ok && u.GetObjectKind().GroupVersionKind().Kind != "" {
		m["kind"] = u.GetObjectKind().GroupVersionKind().Kind
		m["apiVersion"] = u.GetObjectKind().GroupVersionKind().GroupVersion().String()
	}
	if kind, _ := m["kind"].(string); kind != "" {
		if c, ok := copyAsJSON(m); ok {
			result.Object = c.(map[string]any)
			return result, nil
		}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, result); err != nil {
		return nil, fmt.Errorf("error extracting into obj from unstructured: %w", err)
	}
	return result, nil
}

// copyAsJSON copies v (a value of an Unstructured) to what encoding/json's
// Marshal and Unstructured.UnmarshalJSON make of it: maps and slices
// copied, a nil map or slice null, an int an int64, a float64 that JSON
// writes without a fraction or exponent the int64 those digits are when
// it fits one (a float64 otherwise), strings and booleans as they are. ok is false for
// anything else (a string that is not UTF-8, which Marshal changes; a
// float64 JSON cannot hold, which it refuses; a type of Go's other than
// those), which the caller then sends through JSON itself.
func copyAsJSON(v any) (out any, ok bool) {
	switch v := v.(type) {
	case nil, bool:
		return v, true
	case string:
		return v, utf8.ValidString(v)
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false
		}
		if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
			return v, true // written with an exponent: read back a float64
		}
		// Written as encoding/json writes it (the shortest form that reads
		// back the same float64: 9.223372036854775e18 is
		// "9223372036854775000"), and read back as the decoder reads it:
		// without a fraction, an int64 when it fits one.
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, true
			}
		}
		return v, true
	case map[string]any:
		if v == nil {
			return nil, true
		}
		c := make(map[string]any, len(v))
		for k, e := range v {
			if !utf8.ValidString(k) {
				return nil, false
			}
			if c[k], ok = copyAsJSON(e); !ok {
				return nil, false
			}
		}
		return c, true
	case []any:
		if v == nil {
			return nil, true
		}
		c := make([]any, len(v))
		for i, e := range v {
			if c[i], ok = copyAsJSON(e); !ok {
				return nil, false
			}
		}
		return c, true
	default:
		return nil, false
	}
}

package openapi3

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/kube-openapi/pkg/spec3"
)

// Aggregate merges group-version documents into one OpenAPI v3 document,
// the client-side aggregation KEP-2896 promised. Paths are united; a schema
// that several documents define alike (ObjectMeta, say) appears once; a
// schema name that two documents define differently is kept for the first
// and renamed for the others ("<name>_<path>"), with that document's
// $refs rewritten, so every $ref still resolves.
func Aggregate(docs []*Document) (*spec3.OpenAPI, error) {
	out := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": "aggregated"},
		"paths":      map[string]any{},
		"components": map[string]any{"schemas": map[string]any{}},
	}
	paths := out["paths"].(map[string]any)
	schemas := out["components"].(map[string]any)["schemas"].(map[string]any)
	for _, d := range docs {
		var doc map[string]any
		if err := json.Unmarshal(d.JSON, &doc); err != nil {
			return nil, fmt.Errorf("openapi3: %s: %w", d.Path, err)
		}
		if v, ok := doc["info"].(map[string]any); ok {
			out["info"].(map[string]any)["version"] = v["version"]
		}
		own, _ := doc["components"].(map[string]any)
		ownSchemas, _ := own["schemas"].(map[string]any)
		renames := map[string]string{}
		for name, s := range ownSchemas {
			if existing, ok := schemas[name]; ok && !reflect.DeepEqual(existing, s) {
				renames[name] = name + "_" + strings.NewReplacer("/", "_", ".", "_").Replace(d.Path)
			}
		}
		if len(renames) > 0 {
			rewriteRefs(doc, renames)
			ownSchemas, _ = doc["components"].(map[string]any)["schemas"].(map[string]any)
		}
		names := make([]string, 0, len(ownSchemas))
		for name := range ownSchemas {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			target := name
			if r, ok := renames[name]; ok {
				target = r
			}
			if _, ok := schemas[target]; !ok {
				schemas[target] = ownSchemas[name]
			}
		}
		ownPaths, _ := doc["paths"].(map[string]any)
		for p, item := range ownPaths {
			if _, dup := paths[p]; dup {
				return nil, fmt.Errorf("openapi3: path %s is in two documents (the second is %s)", p, d.Path)
			}
			paths[p] = item
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	merged := &spec3.OpenAPI{}
	if err := json.Unmarshal(raw, merged); err != nil {
		return nil, fmt.Errorf("openapi3: aggregated document: %w", err)
	}
	return merged, nil
}

// rewriteRefs renames schemas in a decoded document: their definitions and
// every "$ref" to them.
func rewriteRefs(node any, renames map[string]string) {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			if name, found := strings.CutPrefix(ref, "#/components/schemas/"); found {
				if r, ok := renames[name]; ok {
					n["$ref"] = "#/components/schemas/" + r
				}
			}
		}
		for _, v := range n {
			rewriteRefs(v, renames)
		}
	case []any:
		for _, v := range n {
			rewriteRefs(v, renames)
		}
	}
}

package openapi3

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzIndexSchemas: the index never panics, and on valid JSON it finds
// exactly the schemas encoding/json finds, each a valid JSON value, or
// says why it cannot (not an object where one belongs, a name given twice).
// The same input read as an OpenAPI root gives encoding/json's paths.
func FuzzIndexSchemas(f *testing.F) {
	f.Add([]byte(`{"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=AB"},"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=\u0043D","x":1}}}`))
	for _, seed := range []string{
		`{"openapi":"3.0.0","components":{"schemas":{"A":{"type":"object","properties":{"b":{"$ref":"#/components/schemas/B"}}},"B":{"type":"string","enum":["x","y\\"z"]}}}}`,
		`{"paths":{"/a":{"get":{}}},"components":{"responses":{},"schemas":{"A\u0042":[1,2.5e3,true,false,null]}}}`,
		`{"components":{"schemas":{}}} `,
		`{"components":null}`,
		`[{"components":{}}]`,
		`{"a":"\\\\"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRoot(t, b)
		got, err := indexSchemas(b)
		if err != nil {
			var syntax *SyntaxError
			if !errors.As(err, &syntax) || syntax.Offset < 0 || syntax.Offset > len(b) {
				t.Fatalf("error %v is not a SyntaxError within the input", err)
			}
			if json.Valid(b) && !strings.Contains(err.Error(), "twice") && !strings.Contains(err.Error(), "want '{'") && !strings.Contains(err.Error(), "too deep") {
				t.Fatalf("valid JSON refused: %v", err)
			}
			return
		}
		for name, at := range got {
			if at.start < 0 || at.end > len(b) || at.start >= at.end {
				t.Fatalf("schema %q at %v, outside the input", name, at)
			}
		}
		if !json.Valid(b) {
			return // the index is lenient inside values; parsing them is not
		}
		// Maps, not structs: names match case-sensitively, as in
		// kube-openapi's parser.
		var top, components map[string]json.RawMessage
		var schemas map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("index accepted what encoding/json refuses: %v", err)
		}
		if raw, ok := top["components"]; ok {
			if err := json.Unmarshal(raw, &components); err != nil {
				t.Fatalf("components: %v", err)
			}
		}
		if raw, ok := components["schemas"]; ok {
			if err := json.Unmarshal(raw, &schemas); err != nil {
				t.Fatalf("schemas: %v", err)
			}
		}
		if len(schemas) != len(got) {
			t.Fatalf("%d schemas, encoding/json finds %d", len(got), len(schemas))
		}
		for name, raw := range schemas {
			at, ok := got[name]
			if !ok {
				t.Fatalf("schema %q not indexed", name)
			}
			if string(b[at.start:at.end]) != strings.TrimSpace(string(raw)) {
				t.Fatalf("schema %q: %q, encoding/json has %q", name, b[at.start:at.end], raw)
			}
		}
		// DocumentStats counts objects and depth as encoding/json's tokens
		// do, and each bound stops the index just past it.
		idx, _ := indexDocument(b, nil)
		objects, depth := jsonShape(t, b)
		if idx.stats.Objects != objects || idx.stats.Depth != depth || idx.stats.Schemas != len(schemas) {
			t.Fatalf("stats %+v, encoding/json finds %d objects, %d deep", idx.stats, objects, depth)
		}
		for _, lim := range []DocumentLimits{
			{Schemas: idx.stats.Schemas - 1, Properties: idx.stats.Properties, Objects: objects, Depth: depth},
			{Schemas: idx.stats.Schemas, Properties: idx.stats.Properties - 1, Objects: objects, Depth: depth},
			{Schemas: idx.stats.Schemas, Properties: idx.stats.Properties, Objects: objects - 1, Depth: depth},
			{Schemas: idx.stats.Schemas, Properties: idx.stats.Properties, Objects: objects, Depth: depth - 1},
		} {
			if lim.Schemas < 0 || lim.Properties < 0 || lim.Objects < 0 || lim.Depth < 0 {
				continue // none to pass
			}
			_, err := indexDocument(b, &lim)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("limits %+v of %+v: err = %v, want a LimitError", lim, idx.stats, err)
			}
		}
		within := DocumentLimits{Schemas: idx.stats.Schemas, Properties: idx.stats.Properties, Objects: objects, Depth: depth}
		if _, err := indexDocument(b, &within); err != nil {
			t.Fatalf("limits %+v, the document's own: %v", within, err)
		}
	})
}

// jsonShape counts the objects of valid JSON b, and how deep objects and
// arrays nest in it, with encoding/json's tokens.
func jsonShape(t *testing.T, b []byte) (objects, depth int) {
	dec := json.NewDecoder(bytes.NewReader(b))
	open := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				return objects, depth
			}
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if tok == json.Delim('{') {
				objects++
			}
			open++
			depth = max(depth, open)
		case json.Delim('}'), json.Delim(']'):
			open--
		}
	}
}

func checkRoot(t *testing.T, b []byte) {
	got, err := parseRoot(b, DefaultMaxPaths)
	if err != nil {
		var syntax *SyntaxError
		if !errors.As(err, &syntax) {
			t.Fatalf("root: error %v is not a SyntaxError", err)
		}
		return
	}
	// Maps, not structs: names match case-sensitively.
	var top map[string]json.RawMessage
	var paths map[string]map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return // the scanner is lenient inside the values it skips
	}
	if raw, ok := top["paths"]; ok && json.Unmarshal(raw, &paths) != nil {
		t.Fatalf("root: read, but its paths are not objects to encoding/json")
	}
	want := map[string]string{}
	for p, m := range paths {
		var u string
		if raw, ok := m["serverRelativeURL"]; ok {
			if json.Unmarshal(raw, &u) != nil {
				t.Fatalf("root: %q: the URL read, encoding/json refuses it", p)
			}
			want[p] = u
		}
	}
	if len(got) != len(want) {
		t.Fatalf("root: %d paths, encoding/json finds %d", len(got), len(want))
	}
	for p, u := range want {
		if got[p] != u {
			t.Fatalf("root: %q: %q, encoding/json has %q", p, got[p], u)
		}
	}
}

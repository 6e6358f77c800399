package typed

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestCheckPatchMetaRealDocuments: every kind of every document a
// kube-apiserver v1.36.3 serves passes checkPatchMeta: the check refuses
// nothing real (its merge keys are scalar properties of their items, its
// strategies merge, retainKeys and merge,retainKeys).
func TestCheckPatchMetaRealDocuments(t *testing.T) {
	dir := filepath.Join("..", "testdata", "k8s-v1.36.3", "openapi", "v3")
	kinds, withMergeKey := 0, 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json.gz") || strings.HasSuffix(p, "apis.json.gz") || strings.HasSuffix(p, "api.json.gz") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		r, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		d, err := openapi3.NewDocument(p, "", body)
		if err != nil {
			return err
		}
		list, err := d.Schemas()
		if err != nil {
			return err
		}
		for name, s := range list {
			if _, ok := s.Extensions["x-kubernetes-group-version-kind"]; !ok {
				continue
			}
			kinds++
			if err := checkPatchMeta(list, s); err != nil {
				t.Errorf("%s: %s: %v", p, name, err)
			}
		}
		withMergeKey += strings.Count(string(body), mergeKeyExtension)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if kinds < 100 || withMergeKey < 20 {
		t.Fatalf("checked %d kinds, %d merge keys: the fixtures were not read", kinds, withMergeKey)
	}
}

// hostileKind is a document of one kind, x/v1 W, whose field "list" is a
// list carrying the given merge key, strategy and items (raw JSON, ""
// for none), of elements E whose "name" has the type nameType.
func hostileKind(mergeKey, strategy, items, nameType string) []byte {
	list := `"type":"array"`
	if items != "" {
		list += `,"items":` + items
	}
	if mergeKey != "" {
		list += `,"x-kubernetes-patch-merge-key":` + mergeKey
	}
	if strategy != "" {
		list += `,"x-kubernetes-patch-strategy":` + strategy
	}
	return []byte(`{"openapi":"3.0.0","components":{"schemas":{` +
		`"W":{"type":"object","x-kubernetes-group-version-kind":[{"group":"x","version":"v1","kind":"W"}],"properties":{` +
		`"apiVersion":{"type":"string"},"kind":{"type":"string"},"list":{` + list + `}}},` +
		`"E":{"type":"object","properties":{"name":{"type":` + nameType + `},"obj":{"type":"object"},"v":{"type":"string"}}}}}}`)
}

var hostileGVK = schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "W"}

// threeWay runs CreateThreeWayMergePatch on meta over objects whose "list"
// holds elements with scalar "name" and "v" and an object "obj", and
// returns the panic it raised, if any.
func threeWay(meta strategicpatch.LookupPatchMeta) (panicked any) {
	defer func() { panicked = recover() }()
	obj := func(elems ...string) []byte {
		return []byte(`{"apiVersion":"x/v1","kind":"W","list":[` + strings.Join(elems, ",") + `]}`)
	}
	original := obj(`{"name":"a","obj":{"k":1},"v":"1"}`, `{"name":"b","obj":{"k":2},"v":"2"}`)
	modified := obj(`{"name":"a","obj":{"k":1},"v":"3"}`, `{"name":"c","obj":{"k":3},"v":"4"}`)
	current := obj(`{"name":"b","obj":{"k":2},"v":"2"}`, `{"name":"a","obj":{"k":1},"v":"1"}`, `{"name":"d","obj":{"k":4}}`)
	strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
	return nil
}

// patchMetaOf is what PatchMeta hands out for W of doc, or checkPatchMeta's
// error.
func patchMetaOf(doc []byte) (strategicpatch.LookupPatchMeta, error) {
	d, err := openapi3.NewDocument("apis/x/v1", "", doc)
	if err != nil {
		return nil, err
	}
	k, err := d.Kind(hostileGVK)
	if err != nil {
		return nil, err
	}
	list, err := d.Schemas()
	if err != nil {
		return nil, err
	}
	if err := checkPatchMeta(list, k.Schema); err != nil {
		return nil, err
	}
	return strategicpatch.PatchMetaFromOpenAPIV3{SchemaList: list, Schema: k.Schema}, nil
}

// FuzzPatchMeta: whatever a document says of a list's merge key, strategy,
// items and its elements' key type, either checkPatchMeta refuses it or
// CreateThreeWayMergePatch over its metadata does not panic (on objects
// whose values have the types the schema declares).
func FuzzPatchMeta(f *testing.F) {
	for _, seed := range [][4]string{
		{`"name"`, `"merge"`, `{"$ref":"#/components/schemas/E"}`, `"string"`},
		{`1`, `"merge"`, `{"$ref":"#/components/schemas/E"}`, `"string"`},
		{`"name"`, `2`, `{"$ref":"#/components/schemas/E"}`, `"string"`},
		{`"name"`, `"merge"`, `[{"$ref":"#/components/schemas/E"}]`, `"string"`},
		{`"obj"`, `"merge"`, `{"$ref":"#/components/schemas/E"}`, `"string"`},
		{`"name"`, `"merge,retainKeys"`, `{"allOf":[{"$ref":"#/components/schemas/E"}]}`, `"integer"`},
		{`"name"`, `"sideways"`, `{"$ref":"#/components/schemas/E"}`, `"string"`},
		{`"name"`, `"merge"`, `{"$ref":"#/components/schemas/Nope"}`, `"string"`},
		{`"name"`, `"merge"`, `[]`, `"string"`},
		{`""`, `"replace"`, `{}`, `"object"`},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, mergeKey, strategy, items, nameType string) {
		doc := hostileKind(mergeKey, strategy, items, nameType)
		if !json.Valid(doc) {
			return
		}
		meta, err := patchMetaOf(doc)
		if err != nil {
			return
		}
		if p := threeWay(meta); p != nil {
			t.Fatalf("CreateThreeWayMergePatch panicked on metadata PatchMeta hands out: %v\n%s", p, doc)
		}
	})
}

// TestCheckPatchMetaRefusesWhatPanics (issue 43, finding 3): each
// metadata that made CreateThreeWayMergePatch panic in the caller's
// process, through meta.go's interface conversions and nil pointers and
// patch.go's == on merge keys, is refused with ErrPatchMeta naming the
// field; unchecked, each panics (so the check is what keeps it out).
func TestCheckPatchMetaRefusesWhatPanics(t *testing.T) {
	e := `{"$ref":"#/components/schemas/E"}`
	for _, tc := range []struct {
		name                         string
		mergeKey, strategy, items, t string
		panics                       bool // unchecked
	}{
		{"numeric merge key", `1`, `"merge"`, e, `"string"`, true},
		{"numeric strategy", `"name"`, `2`, e, `"string"`, true},
		{"tuple items", `"name"`, `"merge"`, `[` + e + `]`, `"string"`, true},
		{"object merge key", `"obj"`, `"merge"`, e, `"string"`, true},
		{"unknown strategy", `"name"`, `"sideways"`, e, `"string"`, false},
		{"merge key not a property", `"nope"`, `"merge"`, e, `"string"`, false},
		{"merge key of no type", `"name"`, `"merge"`, e, `null`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := hostileKind(tc.mergeKey, tc.strategy, tc.items, tc.t)
			if _, err := patchMetaOf(doc); !errors.Is(err, ErrPatchMeta) || !strings.Contains(err.Error(), "list") {
				t.Fatalf("err = %v, want ErrPatchMeta naming the field", err)
			}
			if !tc.panics {
				return
			}
			d, _ := openapi3.NewDocument("apis/x/v1", "", doc)
			k, _ := d.Kind(hostileGVK)
			list, _ := d.Schemas()
			if p := threeWay(strategicpatch.PatchMetaFromOpenAPIV3{SchemaList: list, Schema: k.Schema}); p == nil {
				t.Fatal("unchecked, it did not panic: the case tests nothing")
			}
		})
	}
	// And what is well formed is handed on, and patches.
	meta, err := patchMetaOf(hostileKind(`"name"`, `"merge"`, e, `"string"`))
	if err != nil {
		t.Fatal(err)
	}
	if p := threeWay(meta); p != nil {
		t.Fatal(p)
	}
}

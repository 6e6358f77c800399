package openapi3_test

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// realDocuments reads every OpenAPI document a real kube-apiserver v1.36.3
// served, each indexed and parsed whole: the recorded documents with every
// description emptied (testdata, written by internal/fixturegen from the
// shared fixtures; the prose of upstream may not be copied here).
func realDocuments(t *testing.T) []realDocument {
	t.Helper()
	dir := filepath.Join("testdata", "k8s-v1.36.3", "openapi", "v3")
	var docs []realDocument
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json.gz") {
			return err
		}
		body, err := readGzip(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, strings.TrimSuffix(p, ".json.gz"))
		d, err := openapi3.NewDocument(filepath.ToSlash(rel), "", body)
		if err != nil {
			return err
		}
		full, err := d.OpenAPI()
		if err != nil {
			return err
		}
		docs = append(docs, realDocument{d, full})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatalf("no documents under %s", dir)
	}
	return docs
}

func readGzip(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return io.ReadAll(r)
}

type realDocument struct {
	*openapi3.Document
	full *spec3.OpenAPI
}

// TestRealDocuments: every OpenAPI document a real kube-apiserver v1.36.3
// served (descriptions emptied, see realDocuments) indexes to the schemas kube-openapi's
// whole-document parse finds, each equal, and every kind they list is
// found by Kind.
func TestRealDocuments(t *testing.T) {
	checked, kinds := 0, 0
	var apps *openapi3.Document
	for _, d := range realDocuments(t) {
		if d.Path == "apis/apps/v1" {
			apps = d.Document
		}
		if d.full.Components == nil {
			if len(d.SchemaNames()) != 0 {
				t.Errorf("%s: schemas indexed in a document without components", d.Path)
			}
			continue
		}
		if len(d.SchemaNames()) != len(d.full.Components.Schemas) {
			t.Errorf("%s: %d schemas indexed, %d parsed", d.Path, len(d.SchemaNames()), len(d.full.Components.Schemas))
		}
		for name, want := range d.full.Components.Schemas {
			got, err := d.Schema(name)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: schema %s differs (%v)", d.Path, name, err)
			}
			list, _ := got.Extensions["x-kubernetes-group-version-kind"].([]any)
			for _, item := range list {
				m := item.(map[string]any)
				gvk := schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}
				if _, err := d.Kind(gvk); err != nil {
					t.Errorf("%s: %v", d.Path, err)
				}
				kinds++
			}
		}
		checked++
	}
	if checked < 40 || kinds < 250 || apps == nil {
		t.Fatalf("only %d documents and %d kinds checked", checked, kinds)
	}
	// kubectl explain's question, answered from the real apps/v1 document.
	s, err := apps.Kind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	image, _, err := s.Field("spec", "template", "spec", "containers", "image")
	if err != nil || !image.Type.Contains("string") {
		t.Errorf("containers.image: %v %v", image, err)
	}
}

// TestAggregateRealDocuments: the documents of a real kube-apiserver
// v1.36.3 aggregate without a single rename: the only schemas they define
// differently, DeleteOptions and WatchEvent, differ in the kinds their
// x-kubernetes-group-version-kind lists, and come out once, listing all.
func TestAggregateRealDocuments(t *testing.T) {
	var docs []*openapi3.Document
	names := map[string]bool{}
	deleteOptionsKinds := map[string]bool{}
	paths := 0
	for _, d := range realDocuments(t) {
		if d.full.Paths != nil {
			paths += len(d.full.Paths.Paths)
		}
		for _, n := range d.SchemaNames() {
			names[n] = true
		}
		if s, err := d.Schema("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"); err == nil {
			for _, k := range s.Extensions["x-kubernetes-group-version-kind"].([]any) {
				deleteOptionsKinds[fmt.Sprint(k)] = true
			}
		}
		docs = append(docs, d.Document)
	}
	agg, merged := aggregate(t, docs)
	if _, err := openapi_v3.ParseDocument([]byte(`{"openapi":"3.0.0","info":{"title":"x"},"paths":{"/a":{"get":{"responses":{"200":{"description":5}}}}}}`)); err == nil {
		t.Errorf("gnostic accepts an invalid document, so it checks nothing here")
	}
	if len(merged.Components.Schemas) != len(names) || len(merged.Paths.Paths) != paths {
		t.Errorf("%d schemas (want %d), %d paths (want %d)", len(merged.Components.Schemas), len(names), len(merged.Paths.Paths), paths)
	}
	got := merged.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].Extensions["x-kubernetes-group-version-kind"].([]any)
	if len(got) != len(deleteOptionsKinds) || len(got) < 15 {
		t.Errorf("DeleteOptions lists %d kinds, the documents %d", len(got), len(deleteOptionsKinds))
	}
	if merged.Components.SecuritySchemes["BearerToken"] == nil {
		t.Errorf("securitySchemes lost")
	}
	// And the merged document answers as one: a kind from each of two
	// group-versions, through references.
	for _, gvk := range []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "batch", Version: "v1", Kind: "CronJob"}} {
		s, err := agg.Kind(gvk)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Field("spec", "template", "spec"); err != nil && gvk.Kind == "Deployment" {
			t.Errorf("%s: %v", gvk, err)
		}
	}
}

// TestSchemasForServerSideApply: every schema of the real documents,
// aggregated, parsed by Schemas (in parallel), builds apimachinery's
// managedfields TypeConverter, which then types objects of any kind and
// refuses a field their schema lacks; each schema equals kube-openapi's
// whole-document parse.
func TestSchemasForServerSideApply(t *testing.T) {
	var docs []*openapi3.Document
	for _, d := range realDocuments(t) {
		docs = append(docs, d.Document)
		if d.full.Components == nil {
			continue
		}
		all, err := d.Schemas()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(d.full.Components.Schemas) {
			t.Fatalf("%s: %d schemas, want %d", d.Path, len(all), len(d.full.Components.Schemas))
		}
		for name, s := range all {
			if !reflect.DeepEqual(s, d.full.Components.Schemas[name]) {
				t.Fatalf("%s: %s differs", d.Path, name)
			}
		}
	}
	agg, err := openapi3.Aggregate(docs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := agg.Schemas()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(all, false)
	if err != nil {
		t.Fatalf("TypeConverter: %v", err)
	}
	object := func(apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "x", "namespace": "default"},
			"spec":     spec,
		}}
	}
	deployment := object("apps/v1", "Deployment", map[string]any{
		"replicas": int64(2),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "x"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "x", "image": "nginx"}}},
		},
	})
	if _, err := tc.ObjectToTyped(deployment); err != nil {
		t.Errorf("a Deployment: %v", err)
	}
	cronJob := object("batch/v1", "CronJob", map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{}})
	if _, err := tc.ObjectToTyped(cronJob); err != nil {
		t.Errorf("a CronJob: %v", err)
	}
	bad := object("apps/v1", "Deployment", map[string]any{"replicaz": int64(2)})
	if _, err := tc.ObjectToTyped(bad); err == nil {
		t.Errorf("a field the schema lacks was accepted: the converter checks nothing")
	}
}

type derivedKey struct{ n int }

// TestDerived: one build per key and content, whatever the callers; a
// panic in build is an error, kept.
func TestDerived(t *testing.T) {
	d, err := openapi3.NewDocument("apis/x/v1", "/openapi/v3/apis/x/v1?hash=A", []byte(`{"components":{"schemas":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var builds atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, err := d.Derived(derivedKey{1}, func(*openapi3.Document) (any, error) { builds.Add(1); return "one", nil })
			if v != "one" || err != nil {
				t.Errorf("Derived: %v, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds; want 1", n)
	}
	if v, _ := d.Derived(derivedKey{2}, func(*openapi3.Document) (any, error) { return "two", nil }); v != "two" {
		t.Errorf("another key: %v", v)
	}
	for range 2 {
		_, err := d.Derived(derivedKey{3}, func(*openapi3.Document) (any, error) { builds.Add(1); panic("bad schema") })
		if err == nil || !strings.Contains(err.Error(), "bad schema") {
			t.Errorf("panic: %v", err)
		}
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("the panicking build ran %d times; want once", n-1)
	}
}

// TestSchemaJSON: SchemaJSON gives each entry's bytes as the document
// holds them (they parse to what the whole document's parse holds), with
// no room to append into the document's bytes, and an ErrNotFound for a
// name the document does not define.
func TestSchemaJSON(t *testing.T) {
	checked := 0
	for _, d := range realDocuments(t) {
		if d.full.Components == nil {
			continue
		}
		for name, want := range d.full.Components.Schemas {
			raw, err := d.SchemaJSON(name)
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Path, name, err)
			}
			var got spec.Schema
			if err := got.UnmarshalJSON(raw); err != nil || !reflect.DeepEqual(&got, want) {
				t.Fatalf("%s: schema %s's bytes parse to another schema (%v)", d.Path, name, err)
			}
			if cap(raw) != len(raw) {
				t.Fatalf("%s: %s: room for %d more bytes, over the document's", d.Path, name, cap(raw)-len(raw))
			}
			checked++
		}
		if _, err := d.SchemaJSON("no.such.Schema"); !errors.Is(err, openapi3.ErrNotFound) {
			t.Errorf("%s: a name it does not define: %v", d.Path, err)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d schemas checked", checked)
	}
}

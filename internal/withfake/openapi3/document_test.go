package openapi3_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestDocumentMatchesSpec3: what a document gives schema by schema, parsed
// as asked for, is what kube-openapi's parse of the whole document holds:
// the same names, equal schemas, and every kind any schema names found.
func TestDocumentMatchesSpec3(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	docs, err := newClient(t, base).FetchAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	for _, d := range docs {
		full, err := d.OpenAPI()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{}
		if full.Components != nil {
			for name := range full.Components.Schemas {
				want = append(want, name)
			}
		}
		sort.Strings(want)
		if got := d.SchemaNames(); !slices.Equal(got, want) {
			t.Fatalf("%s: names %d, want %d", d.Path, len(got), len(want))
		}
		if len(want) == 0 {
			continue
		}
		for _, name := range want {
			s, err := d.Schema(name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s, full.Components.Schemas[name]) {
				t.Fatalf("%s: schema %s differs from the whole document's", d.Path, name)
			}
			list, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
			for _, item := range list {
				m := item.(map[string]any)
				gvk := schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}
				found, err := d.Kind(gvk)
				if err != nil {
					t.Fatalf("%s: %s: %v", d.Path, gvk, err)
				}
				if found.Name > name {
					t.Errorf("%s: %s found in %s, but %s lists it and sorts first", d.Path, gvk, found.Name, name)
				}
				kinds++
			}
		}
		if s, _ := d.Schema(want[0]); s != mustSchema(t, d, want[0]) {
			t.Errorf("a schema is parsed again on each call")
		}
	}
	if kinds < 100 {
		t.Errorf("only %d kinds checked", kinds)
	}
}

func mustSchema(t *testing.T, d *openapi3.Document, name string) any {
	t.Helper()
	s, err := d.Schema(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMalformedDocuments: a body that is not one well-formed JSON object is
// an error naming where reading stopped, never a panic; a schema that is
// bad inside fails when asked for, and the rest of its document works.
func TestMalformedDocuments(t *testing.T) {
	_, base := discoverytest.Start(t)
	d, err := newClient(t, base).Document(context.Background(), "apis/apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(d.JSON); cut += 401 {
		_, err := openapi3.NewDocument("cut", "", d.JSON[:cut])
		var syntax *openapi3.SyntaxError
		if !errors.As(err, &syntax) {
			t.Fatalf("cut at %d: %v, want a *SyntaxError", cut, err)
		}
	}
	for _, body := range []string{
		``, `[]`, `"x"`, `{"a":1} {}`, `{"a":1,}`, `{"a" 1}`, `{"a":[1}`, `{"a":"\"}`,
		`{"components":{"schemas":{"A":{},"A":{}}}}`,
		`{"components":{},"components":{}}`,
	} {
		if _, err := openapi3.NewDocument("bad", "", []byte(body)); err == nil {
			t.Errorf("%s: no error", body)
		}
	}

	// Escapes: a quote inside a string, an escaped member name.
	ok, err := openapi3.NewDocument("ok", "", []byte(`{"info":{"title":"a \"quoted\\\" }"},"comp\u006fnents":{"schemas":{"A\\B":{"type":"string"},"Bad":{"type":tru},"C":{"$ref":"#/components/schemas/Bad"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ok.SchemaNames(); !slices.Equal(got, []string{`A\B`, "Bad", "C"}) {
		t.Errorf("names %q", got)
	}
	if s, err := ok.Schema(`A\B`); err != nil || !s.Type.Contains("string") {
		t.Errorf(`A\B: %v %v`, s, err)
	}
	if _, err := ok.Schema("Bad"); err == nil || !strings.Contains(err.Error(), `"Bad"`) {
		t.Errorf("bad schema: %v", err)
	}
	if _, err := ok.Schema("Nope"); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("missing schema: %v", err)
	}

	// null where an object belongs is an empty one, as kube-openapi reads it.
	for _, body := range []string{`{"components":null,"paths":null}`, `{"components":{"schemas":null}}`} {
		d, err := openapi3.NewDocument("null", "", []byte(body))
		if err != nil || len(d.SchemaNames()) != 0 {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if _, err := d.OpenAPI(); err != nil {
			t.Errorf("%s: kube-openapi refuses it: %v", body, err)
		}
		if _, err := openapi3.Aggregate([]*openapi3.Document{d}); err != nil {
			t.Errorf("%s: aggregate: %v", body, err)
		}
	}

	// A schema with a broken kind extension does not hide the others'.
	kinds, err := openapi3.NewDocument("kinds", "", []byte(`{"components":{"schemas":{
		"A":{"x-kubernetes-group-version-kind":"not a list"},
		"B":["x-kubernetes-group-version-kind"],
		"C":{"type":"object","x-kubernetes-group-version-kind":[{"group":"g","version":"v1","kind":"C"}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := kinds.Kind(schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "C"}); err != nil || s.Name != "C" {
		t.Errorf("kind C beside broken extensions: %v %v", s, err)
	}
}

// TestDocumentResponseErrors: a document of another content type, or cut
// short, is an error, and the next call asks again.
func TestDocumentResponseErrors(t *testing.T) {
	srv, base := discoverytest.Start(t)
	c := newClient(t, base)
	ctx := context.Background()
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{ContentType: "text/html", Times: 1})
	if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrContentType) {
		t.Errorf("text/html: %v", err)
	}
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{Truncate: 5000, Times: 1})
	if _, err := c.Document(ctx, "apis/apps/v1"); err == nil {
		t.Errorf("truncated: no error")
	}
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{Status: http.StatusServiceUnavailable, Times: 1})
	// HTTP errors are apimachinery's, as discovery's and client-go's are.
	if _, err := c.Document(ctx, "apis/apps/v1"); !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "/openapi/v3/apis/apps/v1?hash=") {
		t.Errorf("503: %v", err)
	}
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 7 * time.Second, Times: 1})
	if _, err := newClient(t, base, openapi3.WithMaxRetries(0)).Document(ctx, "apis/apps/v1"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("429: %v", err)
	} else if d, ok := apierrors.SuggestsClientDelay(err); !ok || d != 7 {
		t.Errorf("429: Retry-After %d (%v), want 7", d, ok)
	}
	if _, err := c.Kind(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); err != nil {
		t.Errorf("after the faults: %v", err)
	}

	// Over the size limit: an error, and nothing stored in the disk cache.
	dc, err := diskcache.Open(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	small := newClient(t, base, openapi3.WithMaxResponseBytes(64<<10), openapi3.WithDiskCache(dc))
	if _, err := small.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrTooLarge) {
		t.Errorf("a document over the limit: %v", err)
	}
	if st := dc.Stats(); st.Writes != 0 {
		t.Errorf("a document over the limit was stored: %+v", st)
	}
}

// TestGnostic: the protobuf form, decoded with gnostic, describes the same
// schemas as the JSON form, and comes from the disk cache when unchanged.
func TestGnostic(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(4, 2))
	client := cachedClients(t, base, t.TempDir())
	ctx := context.Background()
	c := client()
	for _, path := range []string{"apis/apps/v1", "api/v1", "apis/g001.stress.example.com/v1"} {
		pb, err := c.Gnostic(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Document(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range pb.GetComponents().GetSchemas().GetAdditionalProperties() {
			names = append(names, s.GetName())
		}
		sort.Strings(names)
		if !slices.Equal(names, d.SchemaNames()) || len(names) == 0 {
			t.Errorf("%s: protobuf has %d schemas, JSON %d", path, len(names), len(d.SchemaNames()))
		}
	}
	srv.ResetRequests()
	if _, err := client().Gnostic(ctx, "apis/apps/v1"); err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Requests; n != 1 {
		t.Errorf("unchanged protobuf document: %d requests, want the root only", n)
	}
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{ContentType: "application/json", Times: 1})
	if _, err := newClient(t, base).Gnostic(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrContentType) {
		t.Errorf("JSON where protobuf was asked for: %v", err)
	}
}

// TestDocumentConcurrentUse: many goroutines asking one document for kinds
// and schemas get the same answers (run with -race).
func TestDocumentConcurrentUse(t *testing.T) {
	_, base := discoverytest.Start(t)
	c := newClient(t, base)
	d, err := c.Document(context.Background(), "apis/apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	results := make(chan any, 16)
	for range 16 {
		go func() {
			s, err := d.Kind(gvk)
			if err != nil {
				results <- err
				return
			}
			if _, _, err := s.Field("spec", "template", "spec", "containers", "image"); err != nil {
				results <- err
				return
			}
			results <- s.Schema
		}()
	}
	first := <-results
	for range 15 {
		if got := <-results; got != first {
			t.Fatalf("concurrent callers got %v and %v", first, got)
		}
	}
}

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

package openapi3_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// The openapi3 tests that need the fake server's synthetic OpenAPI
// documents (discoverytest): real-sized documents whose schemas refer to
// shared types (ObjectMeta, ListMeta, PodSpec) and have nested fields and
// descriptions. internal/docserver serves one small flat schema per kind,
// which these tests would check too little of (docs/testing.md). The
// openapi3 tests that need only hashes, redirects and caching are in
// openapi3 itself.

// newClient is openapi3's newClient (openapi3/client_helpers_test.go).
func newClient(t testing.TB, base string, opts ...openapi3.Option) *openapi3.Client {
	t.Helper()
	c, err := openapi3.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cachedClients and aggregate are copies of openapi3/client_test.go's.

// cachedClients returns a maker of clients, each as a new process would
// build it, on one disk cache in dir.
func cachedClients(t testing.TB, base, dir string) func() *openapi3.Client {
	return func() *openapi3.Client {
		t.Helper()
		dc, err := diskcache.Open(dir, base)
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, base, openapi3.WithDiskCache(dc))
	}
}

// aggregate merges docs, and checks that kube-openapi parses the result and
// that gnostic finds it valid against the OpenAPI v3 specification.
func aggregate(t *testing.T, docs []*openapi3.Document) (*openapi3.Document, *spec3.OpenAPI) {
	t.Helper()
	agg, err := openapi3.Aggregate(docs)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := agg.OpenAPI()
	if err != nil {
		t.Fatalf("the aggregated document does not parse: %v", err)
	}
	if _, err := openapi_v3.ParseDocument(agg.JSON); err != nil {
		t.Errorf("the aggregated document is not valid OpenAPI v3 (gnostic): %v", err)
	}
	return agg, merged
}

func TestKindAndFieldLookup(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	c := newClient(t, base)
	ctx := context.Background()
	s, err := c.Kind(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil || s.Name != "io.k8s.api.apps.v1.Deployment" {
		t.Fatalf("Deployment: %v %v", s, err)
	}
	containers, description, err := s.Field("spec", "template", "spec", "containers")
	if err != nil || !containers.Type.Contains("array") || !strings.Contains(description, "List of containers") {
		t.Fatalf("spec.template.spec.containers: %v %q %v", containers, description, err)
	}
	image, _, err := s.Field("spec", "template", "spec", "containers", "image")
	if err != nil || !image.Type.Contains("string") {
		t.Errorf("containers.image through array items: %v %v", image, err)
	}
	if _, _, err := s.Field("spec", "nope"); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("missing field: %v", err)
	}
	if _, err := c.Kind(ctx, schema.GroupVersionKind{Group: "g001.stress.example.com", Version: "v1beta1", Kind: "Widget0001"}); err != nil {
		t.Errorf("CRD kind: %v", err)
	}
	if _, err := c.Kind(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Nope"}); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("missing kind: %v", err)
	}
}

// TestStaleHashRedirect: a document asked for with the hash of a root read
// before a change gets a 301, which is followed to the current document.
func TestStaleHashRedirect(t *testing.T) {
	srv, base := discoverytest.Start(t)
	c := newClient(t, base)
	ctx := context.Background()
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "apps", Version: "v1"}
	if err := srv.ChangeSchema(gv); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	d, err := c.Document(ctx, openapi3.PathFor(gv))
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Status != http.StatusMovedPermanently || reqs[1].Status != http.StatusOK {
		t.Fatalf("requests %+v, want a 301 then the document", reqs)
	}
	if !strings.Contains(string(d.JSON), "schema revision 1") {
		t.Errorf("the redirect did not lead to the changed document")
	}
}

// TestAggregateValidates: one document that kube-openapi parses, every
// $ref resolving, shared schemas once, conflicting ones renamed, and a
// schema that refers to a renamed one renamed with it.
func TestAggregateValidates(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	docs, err := newClient(t, base).FetchAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const (
		objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
		listMeta   = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
		wrapper    = "io.example.Wrapper"
	)
	// Two documents, as foreign aggregated API servers might serve them:
	// both define Wrapper alike, byte for byte, referring to ObjectMeta and
	// ListMeta; the second also defines ObjectMeta, differently from the
	// built-in documents.
	foreign := func(group, ownObjectMeta string) *openapi3.Document {
		body := `{"openapi":"3.0.0","info":{"title":"x","version":"1"},"paths":{"/apis/` + group + `/v1/things":{"get":{"responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/` + wrapper + `"}}}}}}}},
		 "components":{"schemas":{"` + wrapper + `":{"type":"object","properties":{"metadata":{"$ref":"#/components/schemas/` + objectMeta + `"},"list":{"$ref":"#/components/schemas/` + listMeta + `"}}}` + ownObjectMeta + `},
		  "securitySchemes":{"BearerToken":{"type":"apiKey","name":"authorization","in":"header"}}},
		 "security":[{"BearerToken":[]}]}`
		d, err := openapi3.NewDocument("apis/"+group+"/v1", "", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	docs = append(docs, foreign("a.example.com", ""),
		foreign("b.example.com", `,"`+objectMeta+`":{"type":"object","description":"a different one"}`))
	agg, merged := aggregate(t, docs)
	var generic any
	if err := json.Unmarshal(agg.JSON, &generic); err != nil {
		t.Fatal(err)
	}
	refs := 0
	var walk func(any)
	walk = func(n any) {
		switch v := n.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				name := strings.TrimPrefix(ref, "#/components/schemas/")
				if merged.Components.Schemas[name] == nil {
					t.Errorf("dangling $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(generic)
	total, names := 0, map[string]bool{}
	for _, d := range docs {
		doc, _ := d.OpenAPI()
		if doc.Paths != nil {
			total += len(doc.Paths.Paths)
		}
		for _, n := range d.SchemaNames() {
			names[n] = true
		}
	}
	if refs < 100 || len(merged.Paths.Paths) != total {
		t.Errorf("%d refs, %d paths (want %d)", refs, len(merged.Paths.Paths), total)
	}
	// Every name once, plus the two renamed for the second foreign document.
	if len(merged.Components.Schemas) != len(names)+2 {
		t.Errorf("%d schemas, want %d", len(merged.Components.Schemas), len(names)+2)
	}
	if merged.Components.Schemas[objectMeta].Description == "a different one" {
		t.Errorf("the first definition of ObjectMeta was not kept")
	}
	renamed := merged.Components.Schemas[objectMeta+"_apis_b_example_com_v1"]
	if renamed == nil || renamed.Description != "a different one" {
		t.Errorf("the conflicting schema was not renamed: %v", renamed)
	}
	w := merged.Components.Schemas[wrapper+"_apis_b_example_com_v1"]
	if w == nil {
		t.Fatalf("the schema that refers to the renamed one was not renamed with it")
	}
	metadata, list := w.Properties["metadata"], w.Properties["list"]
	if ref := metadata.Ref.String(); ref != "#/components/schemas/"+objectMeta+"_apis_b_example_com_v1" {
		t.Errorf("its reference: %s", ref)
	}
	if ref := list.Ref.String(); ref != "#/components/schemas/"+listMeta {
		t.Errorf("its reference to a shared schema: %s", ref)
	}
	for group, want := range map[string]string{"a.example.com": wrapper, "b.example.com": wrapper + "_apis_b_example_com_v1"} {
		item := merged.Paths.Paths["/apis/"+group+"/v1/things"]
		if ref := item.Get.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); ref != "#/components/schemas/"+want {
			t.Errorf("%s: path refers to %s, want %s", group, ref, want)
		}
	}
	if len(merged.SecurityRequirement) != 1 || merged.Components.SecuritySchemes["BearerToken"] == nil {
		t.Errorf("security: %v %v", merged.SecurityRequirement, merged.Components.SecuritySchemes)
	}
}

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
// short, is an error, remembered for a while (1 s, doubling with each
// failure: openapi3.ErrRemembered), and the next call after it asks again.
func TestDocumentResponseErrors(t *testing.T) {
	srv, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour))
	ctx := context.Background()
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{ContentType: "text/html", Times: 1})
	if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrContentType) || errors.Is(err, openapi3.ErrRemembered) {
		t.Errorf("text/html: %v", err)
	}
	if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrContentType) || !errors.Is(err, openapi3.ErrRemembered) {
		t.Errorf("text/html, at once again: %v", err)
	}
	clk.Step(time.Minute)
	srv.InjectFault("/openapi/v3/apis/apps/v1", discoverytest.Fault{Truncate: 5000, Times: 1})
	if _, err := c.Document(ctx, "apis/apps/v1"); err == nil || errors.Is(err, openapi3.ErrRemembered) {
		t.Errorf("truncated: %v", err)
	}
	clk.Step(time.Minute)
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
	clk.Step(time.Minute)
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

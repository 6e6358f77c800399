package typed_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// server serves OpenAPI v3 through kube-openapi's handler3, as a
// kube-apiserver does (the root, ?hash= URLs, 301s for stale hashes):
// the documents a real v1.36.3 server served (openapi3/testdata, every
// description emptied) and a CRD's, and logs the requests.
type server struct {
	*httptest.Server
	svc *handler3.OpenAPIService

	mu   sync.Mutex
	log  []string // request paths, in order
	docs map[string]map[string]any
}

// fixtureDir is where openapi3's tests read the recorded documents.
var fixtureDir = filepath.Join("..", "testdata", "k8s-v1.36.3", "openapi", "v3")

// fixtures are the recorded group-version documents by path ("apis/apps/v1"),
// read once per test binary.
var fixtures = sync.OnceValues(func() (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	err := filepath.WalkDir(fixtureDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json.gz") {
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
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixtureDir, strings.TrimSuffix(p, ".json.gz"))
		out[filepath.ToSlash(rel)] = doc
		return nil
	})
	return out, err
})

// crdPath is the CRD's group-version document.
const crdPath = "apis/stable.example.com/v1"

// newServer serves the fixtures and the CRD's document.
func newServer(t testing.TB) *server {
	t.Helper()
	docs, err := fixtures()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{svc: handler3.NewOpenAPIService(), docs: map[string]map[string]any{}}
	for p, d := range docs {
		s.set(t, p, d)
	}
	s.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], ""))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, r.URL.Path)
		s.mu.Unlock()
		switch {
		case r.URL.Path == "/openapi/v3":
			// As a kube-apiserver (its aggregator) serves the root: no
			// ETag, so no cache keeps it.
			r.Header.Del("If-None-Match")
			s.svc.HandleDiscovery(docserver.RootWriter{ResponseWriter: w}, r)
		case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
			s.svc.HandleGroupVersion(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// set serves doc at path (a new hash when it differs).
func (s *server) set(t testing.TB, path string, doc map[string]any) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var o spec3.OpenAPI
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s.mu.Lock()
	s.docs[path] = doc
	s.mu.Unlock()
	s.svc.UpdateGroupVersion(path, &o)
}

// requests returns the paths requested since the last call.
func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

// documentRequests are those of requests for group-version documents.
func documentRequests(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if r != "/openapi/v3" {
			out = append(out, strings.TrimPrefix(r, "/openapi/v3/"))
		}
	}
	return out
}

// client is a kubeatlas client of s.
func (s *server) client(t testing.TB, opts ...openapi3.Option) *openapi3.Client {
	t.Helper()
	c, err := openapi3.NewForHTTPClient(nil, s.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientGo is client-go's own OpenAPI v3 client of s (the oracle's).
func (s *server) clientGo(t testing.TB) openapi.Client {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	return dc.OpenAPIV3()
}

// crdDocument is the document a kube-apiserver serves for a CRD
// (stable.example.com/v1 Widget, with WidgetList): the CRD's structural
// schema (int-or-string, preserve-unknown-fields, an embedded resource,
// list-type map with two keys, a set, an atomic map) and, as a real
// server's, the io.k8s.apimachinery schemas it refers to, copied from
// apps/v1's. revision changes the document (and its hash) without
// changing the kind's types unless it names a field: "extra" adds one;
// "gadget" adds a kind, Gadget, as a second CRD of the group does.
func crdDocument(t testing.TB, apps map[string]any, revision string) map[string]any {
	t.Helper()
	schemas := map[string]any{}
	for name, s := range apps["components"].(map[string]any)["schemas"].(map[string]any) {
		if strings.HasPrefix(name, "io.k8s.apimachinery.") {
			schemas[name] = s
		}
	}
	ref := func(name string) map[string]any {
		return map[string]any{"allOf": []any{map[string]any{"$ref": "#/components/schemas/" + name}}}
	}
	str := map[string]any{"type": "string"}
	meta := ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
	spec := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"replicas": map[string]any{"type": "integer", "format": "int64"},
			"port":     map[string]any{"x-kubernetes-int-or-string": true, "anyOf": []any{map[string]any{"type": "integer"}, str}},
			"config":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			"template": map[string]any{
				"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
				"properties": map[string]any{"apiVersion": str, "kind": str, "metadata": map[string]any{"type": "object"}},
			},
			"ports": map[string]any{
				"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name", "protocol"},
				"items": map[string]any{
					"type": "object", "required": []any{"name", "protocol"},
					"properties": map[string]any{"name": str, "protocol": str, "port": map[string]any{"type": "integer", "format": "int64"}},
				},
			},
			"tags":     map[string]any{"type": "array", "x-kubernetes-list-type": "set", "items": str},
			"labels":   map[string]any{"type": "object", "additionalProperties": str},
			"selector": map[string]any{"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": str},
		},
	}
	if revision == "extra" {
		spec["properties"].(map[string]any)["extra"] = str
	}
	status := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"ready": map[string]any{"type": "boolean"},
			"conditions": map[string]any{
				"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"type"},
				"items": map[string]any{
					"type": "object", "required": []any{"type"},
					"properties": map[string]any{"type": str, "status": str, "reason": str},
				},
			},
		},
	}
	gvk := func(kind string) []any {
		return []any{map[string]any{"group": "stable.example.com", "version": "v1", "kind": kind}}
	}
	schemas["com.example.stable.v1.Widget"] = map[string]any{
		"type": "object", "description": revision,
		"properties": map[string]any{
			"apiVersion": str, "kind": str, "metadata": meta, "spec": spec, "status": status,
		},
		"x-kubernetes-group-version-kind": gvk("Widget"),
	}
	schemas["com.example.stable.v1.WidgetList"] = map[string]any{
		"type": "object", "required": []any{"items"},
		"properties": map[string]any{
			"apiVersion": str, "kind": str,
			"items":    map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/com.example.stable.v1.Widget"}},
			"metadata": ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"),
		},
		"x-kubernetes-group-version-kind": gvk("WidgetList"),
	}
	if revision == "gadget" { // a second CRD of the group: a new kind
		gadget := maps.Clone(schemas["com.example.stable.v1.Widget"].(map[string]any))
		gadget["x-kubernetes-group-version-kind"] = gvk("Gadget")
		schemas["com.example.stable.v1.Gadget"] = gadget
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
		"paths":      map[string]any{},
		"components": map[string]any{"schemas": schemas},
	}
}

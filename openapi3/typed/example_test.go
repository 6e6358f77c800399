package typed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// newExampleServer serves the recorded v1.36.3 documents (testdata of
// openapi3, descriptions removed) through kube-openapi's handler3.
func newExampleServer() *httptest.Server {
	docs, err := fixtures()
	if err != nil {
		panic(err)
	}
	svc := handler3.NewOpenAPIService()
	for path, d := range docs {
		b, _ := json.Marshal(d)
		var doc spec3.OpenAPI
		if err := json.Unmarshal(b, &doc); err != nil {
			panic(err)
		}
		svc.UpdateGroupVersion(path, &doc)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/openapi/v3", svc.HandleDiscovery)
	mux.HandleFunc("/openapi/v3/", svc.HandleGroupVersion)
	return httptest.NewServer(mux)
}

// Extract what a field manager applied to an object; the converter reads
// apps/v1's document alone.
func ExampleExtractor_Extract() {
	ts := newExampleServer()
	defer ts.Close()
	c, _ := openapi3.NewForHTTPClient(nil, ts.URL)
	conv, err := typed.New(c)
	if err != nil {
		panic(err)
	}
	// Two managers apply to one Deployment (through the field manager that
	// a server, or client-go's fake ObjectTracker, runs).
	fm := managedfieldstest.NewTestFieldManager(conv, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	for manager, cfg := range map[string]string{
		"deployer": `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`,
		"injector": `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"proxy","image":"envoy"}]}}}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(cfg)); err != nil {
			panic(err)
		}
		if err := fm.Apply(u, manager, false); err != nil {
			panic(err)
		}
	}
	applied, err := conv.Extractor().Extract(fm.Live().(*unstructured.Unstructured), "injector")
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(applied.Object["spec"])
	fmt.Println(string(b))
	// Output:
	// {"template":{"spec":{"containers":[{"image":"envoy","name":"proxy"}]}}}
}

// Compute kubectl's client-side apply patch with the strategic-merge-patch
// metadata of Deployment from OpenAPI v3: containers merge by name.
func ExampleConverter_PatchMeta() {
	ts := newExampleServer()
	defer ts.Close()
	c, _ := openapi3.NewForHTTPClient(nil, ts.URL)
	conv, _ := typed.New(c)
	meta, err := conv.PatchMeta(context.Background(), schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		panic(err)
	}
	original := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1"}]}}}}`)
	modified := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}`)
	current := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1"},{"name":"injected","image":"envoy"}]}}}}`)
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(patch))
	// Output:
	// {"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"image":"nginx:2","name":"web"}]}}}}
}

package openapi3_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"

	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
)

// newExampleServer serves the OpenAPI v3 documents in testdata/example
// (two small group-version documents, shaped as a kube-apiserver's) through
// kube-openapi's handler3, the code a kube-apiserver serves them with: the
// root lists each at its ?hash= URL.
func newExampleServer() *httptest.Server {
	svc := handler3.NewOpenAPIService()
	for _, path := range []string{"apis/apps/v1", "apis/batch/v1"} {
		b, err := os.ReadFile("testdata/example/" + path + ".json")
		if err != nil {
			panic(err)
		}
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

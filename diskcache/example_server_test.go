package diskcache_test

import (
	"net/http"
	"net/http/httptest"
	"time"
)

// newExampleServer answers like a kube-apiserver for an OpenAPI document
// at a ?hash= URL: immutable, a year of freshness.
func newExampleServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"ABC"`)
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
		w.Write([]byte(`{"openapi":"3.0.0"}`))
	}))
}

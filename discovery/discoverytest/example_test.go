package discoverytest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// A test serves the fake cluster with httptest, changes it, and counts what
// its client asked.
func ExampleServer() {
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(100, 10))
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	fetch := func(etag string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/apis", nil)
		req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	first := fetch("")
	fmt.Println(first.StatusCode, fetch(first.Header.Get("ETag")).StatusCode)

	_ = srv.AddCRD(discoverytest.CRD{Group: "example.com", Versions: []string{"v1"}, Kind: "Widget"})
	fmt.Println(fetch(first.Header.Get("ETag")).StatusCode)

	st := srv.Stats()
	fmt.Printf("%d requests, %d not modified\n", st.Requests, st.NotModified)
	// Output:
	// 200 304
	// 200
	// 3 requests, 1 not modified
}

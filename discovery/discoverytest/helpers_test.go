package discoverytest_test

import (
	"io"
	"net/http"
	"testing"
)

const (
	acceptV2JSON      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	acceptV2PB        = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	acceptV2Beta1JSON = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	acceptV2Beta1PB   = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	// acceptAll is what a negotiating client sends: every aggregated type in
	// preference order, then plain JSON for legacy servers.
	acceptAll = acceptV2PB + "," + acceptV2JSON + "," + acceptV2Beta1JSON + ",application/json"
)

// get sends a GET with the given header name/value pairs and reads the body.
func get(t testing.TB, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.DefaultClient, http.MethodGet, url, header...)
}

func do(t testing.TB, c *http.Client, method, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp, body
}

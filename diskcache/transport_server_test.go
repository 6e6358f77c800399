package diskcache_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// The transport's tests against a server that answers as a kube-apiserver
// does (internal/docserver): discovery with ETags, OpenAPI v3 through
// kube-openapi's handler3.

// TestTransport: OpenAPI documents at ?hash= URLs are served from the cache
// with no request; discovery is revalidated (304); JSON and protobuf of one
// URL are kept apart; client-go's timeout parameter does not split keys.
func TestTransport(t *testing.T) {
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := open(t, t.TempDir())
	hc := &http.Client{Transport: diskcache.NewTransport(nil, c)}
	get := func(path, accept string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := new(bytes.Buffer)
		body.ReadFrom(resp.Body)
		if resp.StatusCode != 200 || body.Len() == 0 {
			t.Fatalf("%s: %d, %d bytes", path, resp.StatusCode, body.Len())
		}
		return resp
	}
	_ = get("/openapi/v3", "application/json")
	root := srvRoot(t, ts.URL)
	apps := root["apis/apps/v1"]
	get(apps, "application/json")
	get(apps, "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
	srv.ResetRequests()
	if r := get(apps+"&timeout=32s", "application/json"); r.Header.Get("X-From-Cache") != "1" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Errorf("immutable document not served from cache as JSON: %v", r.Header)
	}
	if r := get(apps, "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"); r.Header.Get("X-From-Cache") != "1" || !strings.Contains(r.Header.Get("Content-Type"), "protobuf") {
		t.Errorf("protobuf document not served from cache as protobuf: %v", r.Header)
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests for cached immutable documents", n)
	}
	get("/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	srv.ResetRequests()
	if r := get("/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"); r.Header.Get("X-From-Cache") != "1" {
		t.Errorf("discovery not revalidated from cache")
	}
	if st := srv.Stats(); st.Requests != 1 || st.NotModified != 1 {
		t.Errorf("discovery revalidation: %+v, want one 304", st)
	}
}

func srvRoot(t *testing.T, base string) map[string]string {
	resp, err := http.Get(base + "/openapi/v3")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := new(bytes.Buffer)
	buf.ReadFrom(resp.Body)
	out := map[string]string{}
	// {"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=..."}}}
	for _, part := range strings.Split(buf.String(), `"serverRelativeURL":"`)[1:] {
		u := part[:strings.Index(part, `"`)]
		p := strings.TrimPrefix(u[:strings.Index(u, "?")], "/openapi/v3/")
		out[p] = strings.ReplaceAll(u, `\u0026`, "&")
	}
	return out
}

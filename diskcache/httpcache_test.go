package diskcache_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gregjones/httpcache"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

var _ httpcache.Cache = diskcache.HTTPCache{}

// TestHTTPCacheCompatible: users who plug the Cache into gregjones/
// httpcache (client-go's disk-cached discovery does) store through Set what
// the Cache serves under the key as a Name, and httpcache's transport on it
// revalidates an ETag'd response with a 304 and serves the body from the
// disk.
func TestHTTPCacheCompatible(t *testing.T) {
	c := open(t, t.TempDir())
	h := c.HTTPCache()
	h.Set("https://h/apis", []byte("value"))
	if v, ok := c.Get(diskcache.Key{Name: "https://h/apis"}); !ok || string(v) != "value" {
		t.Errorf("the Cache's Get of what Set stored: %q %v", v, ok)
	}
	if v, ok := h.Get("https://h/apis"); !ok || string(v) != "value" {
		t.Errorf("Get of what Set stored: %q %v", v, ok)
	}
	h.Delete("https://h/apis")
	if _, ok := h.Get("https://h/apis"); ok {
		t.Errorf("a deleted key is served")
	}
	if _, ok := (diskcache.HTTPCache{}).Get("k"); ok {
		t.Errorf("the zero HTTPCache served a value")
	}

	var notModified atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"APIGroupList"}`)
	}))
	defer ts.Close()
	hc := &http.Client{Transport: httpcache.NewTransport(open(t, t.TempDir()).HTTPCache())}
	for i := range 2 {
		resp, err := hc.Get(ts.URL + "/apis")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != `{"kind":"APIGroupList"}` || (i == 1) != (resp.Header.Get(httpcache.XFromCache) == "1") {
			t.Errorf("request %d: %q, from cache %q", i, b, resp.Header.Get(httpcache.XFromCache))
		}
	}
	if notModified.Load() != 1 {
		t.Errorf("%d revalidations, want 1", notModified.Load())
	}
}

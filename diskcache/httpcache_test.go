package diskcache_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gregjones/httpcache"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

var _ httpcache.Cache = (*diskcache.Cache)(nil)

// setOnly is the Cache as httpcache uses it: through Set, which has no
// error to return.
type setOnly struct{ *diskcache.Cache }

func (s setOnly) Put(key string, value []byte) error { s.Set(key, value); return nil }

// TestHTTPCacheCompatible: users who plug the Cache into gregjones/
// httpcache (client-go's disk-cached discovery does) get what the suite
// checks through Set, and httpcache's transport on it revalidates an ETag'd
// response with a 304 and serves the body from the disk.
func TestHTTPCacheCompatible(t *testing.T) {
	diskcachetest.Run(t, func(t *testing.T) diskcachetest.Store { return setOnly{open(t, t.TempDir())} }, diskcachetest.Hooks{})

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
	hc := &http.Client{Transport: httpcache.NewTransport(open(t, t.TempDir()))}
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

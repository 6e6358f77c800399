package diskcache_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// TestImmutableDocuments: a ?hash= OpenAPI document is stored only when it
// may be (fresh, public, read to the end), is served afterwards with no
// request while fresh, and is revalidated once it is not.
func TestImmutableDocuments(t *testing.T) {
	var requests, revalidations atomic.Int32
	expires := time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC1123) // "UTC", as kube-apiserver writes it
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("If-None-Match") == `"e1"` {
			revalidations.Add(1)
			w.Header().Set("Expires", time.Now().AddDate(2, 0, 0).UTC().Format(time.RFC1123))
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"e1"`)
		switch r.URL.Path {
		case "/openapi/v3/apis/private/v1":
			w.Header().Set("Cache-Control", "private, immutable")
			w.Header().Set("Expires", expires)
		case "/openapi/v3/apis/expired/v1":
			w.Header().Set("Cache-Control", "public, immutable")
			w.Header().Set("Expires", "Mon, 02 Jan 2006 15:04:05 GMT")
		default:
			w.Header().Set("Cache-Control", "public, immutable")
			w.Header().Set("Expires", expires)
		}
		io.WriteString(w, `{"openapi":"3.0.0","path":"`+r.URL.Path+`"}`+strings.Repeat(" ", 64<<10))
	}))
	defer ts.Close()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	c := open(t, t.TempDir(), diskcache.WithClock(clock))
	hc := &http.Client{Transport: diskcache.NewTransport(nil, c)}
	get := func(path string, readAll bool) (fromCache bool) {
		t.Helper()
		resp, err := hc.Get(ts.URL + path + "?hash=A")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if readAll {
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), path) {
				t.Fatalf("%s: body %.60q", path, b)
			}
		} else {
			io.ReadFull(resp.Body, make([]byte, 100))
		}
		return resp.Header.Get("X-From-Cache") == "1"
	}
	const doc = "/openapi/v3/apis/apps/v1"

	get(doc, false) // not read to the end: not stored
	if get(doc, true) {
		t.Errorf("a response read halfway was stored")
	}
	requests.Store(0)
	if !get(doc, true) || requests.Load() != 0 {
		t.Errorf("a fresh immutable document cost %d requests", requests.Load())
	}
	// Served from the cache, the body is the stored bytes, whole, taken
	// without a copy through Bytes.
	resp, err := hc.Get(ts.URL + doc + "?hash=A")
	if err != nil {
		t.Fatal(err)
	}
	sb, ok := resp.Body.(*diskcache.StoredBody)
	if !ok || !strings.Contains(string(sb.Bytes()), doc) || int64(len(sb.Bytes())) != resp.ContentLength {
		t.Errorf("a cached document's body is %T, not the stored bytes", resp.Body)
	} else if b, _ := io.ReadAll(resp.Body); string(b) != string(sb.Bytes()) {
		t.Errorf("reading a stored body gives other bytes than Bytes")
	}
	resp.Body.Close()
	for _, path := range []string{"/openapi/v3/apis/private/v1", "/openapi/v3/apis/expired/v1"} {
		get(path, true)
		requests.Store(0)
		get(path, true)
		if requests.Load() != 1 {
			t.Errorf("%s: %d requests the second time, want 1", path, requests.Load())
		}
	}

	// A year on, the entry is no longer fresh to the cache's clock: it is
	// revalidated (If-None-Match, a 304), not trusted.
	clock.SetTime(time.Now().AddDate(1, 0, 1))
	requests.Store(0)
	get(doc, true)
	if requests.Load() != 1 || revalidations.Load() != 1 {
		t.Errorf("an expired entry cost %d requests, %d revalidations, want one", requests.Load(), revalidations.Load())
	}
	// The 304's Expires renewed it: no request.
	requests.Store(0)
	if !get(doc, true) || requests.Load() != 0 {
		t.Errorf("after the renewal: %d requests", requests.Load())
	}
}

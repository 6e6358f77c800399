package diskcache_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	// Private: never stored. Expired on arrival but with an ETag: stored,
	// and the second time revalidated (a 304, the body from the cache).
	for path, revalidated := range map[string]bool{"/openapi/v3/apis/private/v1": false, "/openapi/v3/apis/expired/v1": true} {
		get(path, true)
		requests.Store(0)
		revalidations.Store(0)
		fromCache := get(path, true)
		if requests.Load() != 1 || fromCache != revalidated || (revalidations.Load() == 1) != revalidated {
			t.Errorf("%s: %d requests, %d revalidations the second time, from the cache %v; want 1 request, revalidated %v",
				path, requests.Load(), revalidations.Load(), fromCache, revalidated)
		}
	}
	revalidations.Store(0)

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

// memStore is a Store that is not a Cache: one value per Name.
type memStore struct {
	mu sync.Mutex
	m  map[string]memValue
}

type memValue struct {
	version string
	value   []byte
}

func (s *memStore) Get(k diskcache.Key) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k.Name]
	if !ok || v.version != k.Version {
		return nil, false
	}
	return v.value, true
}
func (s *memStore) Put(k diskcache.Key, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k.Name] = memValue{k.Version, bytes.Clone(v)}
	return nil
}
func (s *memStore) Delete(k diskcache.Key) { s.mu.Lock(); defer s.mu.Unlock(); delete(s.m, k.Name) }

// TestOnePathForEveryGET: on any Store, a response with an ETag (the
// OpenAPI root) is stored as read and revalidated, its 304 answered from
// the store; one without an ETag or a lifetime is never stored; and a 200
// that fails the checks removes the older entry instead of leaving it to
// be revalidated.
func TestOnePathForEveryGET(t *testing.T) {
	var requests, notModified atomic.Int32
	var broken atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			w.Header().Set("ETag", `"root1"`)
			if !broken.Load() && r.Header.Get("If-None-Match") == `"root1"` {
				notModified.Add(1)
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		if broken.Load() {
			io.WriteString(w, `{"paths":`) // does not parse
			return
		}
		io.WriteString(w, `{"paths":{}}`)
	}))
	defer ts.Close()
	store := &memStore{m: map[string]memValue{}}
	hc := &http.Client{Transport: diskcache.NewTransport(nil, store)}
	get := func(path string) (body string, fromCache bool) {
		t.Helper()
		resp, err := hc.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get(diskcache.FromCache) == "1"
	}
	get("/openapi/v3")
	if body, fromCache := get("/openapi/v3"); body != `{"paths":{}}` || !fromCache || notModified.Load() != 1 {
		t.Errorf("the root again: %q, from the store %v, %d 304s; want its body from the store after a 304", body, fromCache, notModified.Load())
	}
	get("/legacy")
	if _, fromCache := get("/legacy"); fromCache || len(store.m) != 1 {
		t.Errorf("a response with neither ETag nor lifetime was stored (%d entries)", len(store.m))
	}
	broken.Store(true)
	if body, _ := get("/openapi/v3"); body != `{"paths":` {
		t.Errorf("the broken root was not passed on as it came: %q", body)
	}
	if len(store.m) != 0 {
		t.Errorf("a root that does not parse left %d entries (the older one should go)", len(store.m))
	}
}

// TestTransportPromises pins what NewTransport's doc says beyond the
// common path: a body over WithMaxBodyBytes removes the older entry for
// its key; a request whose Cache-Control says no-cache is revalidated
// though its entry is fresh; one that says no-store goes past the cache.
func TestTransportPromises(t *testing.T) {
	var requests atomic.Int32
	var big atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
		if big.Load() {
			io.WriteString(w, `{"pad":"`+strings.Repeat("x", 4096)+`"}`)
			return
		}
		io.WriteString(w, `{"small":true}`)
	}))
	defer ts.Close()
	store := &memStore{m: map[string]memValue{}}
	hc := &http.Client{Transport: diskcache.NewTransport(nil, store, diskcache.WithMaxBodyBytes(1024))}
	get := func(cacheControl string) bool {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/doc", nil)
		if cacheControl != "" {
			req.Header.Set("Cache-Control", cacheControl)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.Header.Get(diskcache.FromCache) == "1"
	}
	get("")
	if !get("") || len(store.m) != 1 {
		t.Fatalf("a fresh response was not stored and served (%d entries)", len(store.m))
	}
	requests.Store(0)
	if get("no-cache") || requests.Load() != 1 {
		t.Errorf("no-cache: %d requests, want the fresh entry revalidated with one", requests.Load())
	}
	requests.Store(0)
	if get("no-store") || requests.Load() != 1 {
		t.Errorf("no-store: %d requests, want one past the cache", requests.Load())
	}
	big.Store(true)
	get("no-cache")
	if len(store.m) != 0 {
		t.Errorf("a body over the limit left the older entry (%d entries)", len(store.m))
	}
}

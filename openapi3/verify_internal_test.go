package openapi3

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestEachDocumentHashedAndDecodedOnce: a JSON document's SHA-512 is
// computed once on its way to the disk cache (by the cache's check, which
// hands its verdict to the caller), not again on a read back from a
// *diskcache.Cache (a directory only the user or root can write, holding
// what this package checked), and once on each read back from any other
// store (shared: a fleet's content, Redis); a protobuf document is decoded
// once either way (the check's decoding is the one returned). Without a
// disk cache, once each too.
func TestEachDocumentHashedAndDecodedOnce(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	ctx := context.Background()
	dir := t.TempDir()
	newClient := func(t *testing.T, disk bool, shared ...bool) *Client {
		var opts []Option
		if disk {
			dc, err := diskcache.Open(dir, base)
			if err != nil {
				t.Fatal(err)
			}
			var store diskcache.Store = dc
			if len(shared) > 0 && shared[0] {
				store = sharedStore{dc}
			}
			opts = append(opts, WithDiskCache(store))
		}
		c, err := NewForHTTPClient(nil, base, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	want := func(t *testing.T, what string, c *Client, hashes, decodes int64) {
		t.Helper()
		if h, d := c.work.hashes.Load(), c.work.decodes.Load(); h != hashes || d != decodes {
			t.Errorf("%s: %d SHA-512s and %d protobuf decodings, want %d and %d", what, h, d, hashes, decodes)
		}
	}
	const pbPath = "apis/apps/v1"
	for _, disk := range []bool{true, false} {
		c := newClient(t, disk)
		docs, err := c.FetchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Gnostic(ctx, pbPath); err != nil {
			t.Fatal(err)
		}
		want(t, map[bool]string{true: "cold disk cache", false: "no disk cache"}[disk], c, int64(len(docs)), 1)
	}
	warm := newClient(t, true)
	docs, err := warm.FetchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Gnostic(ctx, pbPath); err != nil {
		t.Fatal(err)
	}
	n := int64(len(docs))
	want(t, "warm disk cache", warm, 0, 1)

	shared := newClient(t, true, true)
	if _, err := shared.FetchAll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "warm shared store", shared, n, 0)

	if err := srv.ChangeSchema(schema.GroupVersion{Group: "apps", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.FetchAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Gnostic(ctx, pbPath); err != nil {
		t.Fatal(err)
	}
	want(t, "after one change", warm, 1, 2)
}

// TestForeignEntriesAreCheckedOnRead: a JSON document filed in a shared
// store under its ?hash= by another writer (another cluster of a fleet,
// another host's Redis) is checked against the hash on read, as a
// server's answer is: one that is not the hash's is dropped and read from
// the server, once, instead of being served until it expires.
func TestForeignEntriesAreCheckedOnRead(t *testing.T) {
	const path = "apis/apps/v1"
	base, _, dc := plantForgedEntry(t, path)
	ctx := context.Background()
	if dc.Stats().Writes != 1 {
		t.Fatalf("the other writer stored nothing: %+v", dc.Stats())
	}

	reader, err := NewForHTTPClient(nil, base, WithDiskCache(sharedStore{dc}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reader.Document(ctx, path)
	if err != nil {
		t.Fatalf("a foreign entry made the document fail: %v", err)
	}
	if strings.Contains(string(d.JSON), "forged") {
		t.Errorf("a foreign entry that is not its hash's was used")
	}
	again, err := NewForHTTPClient(nil, base, WithDiskCache(sharedStore{dc}))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := again.Document(ctx, path); err != nil || strings.Contains(string(d.JSON), "forged") {
		t.Errorf("the next reader: %v (forged: %v): the real document was not filed in its place", err, err == nil && strings.Contains(string(d.JSON), "forged"))
	}
}

// sharedStore is a Store that others write too (a fleet's content store,
// Redis), as openapi3 sees one: anything but a *diskcache.Cache.
type sharedStore struct{ diskcache.Store }

// TestSharedStoreRootIsTheServers: the root names every document's
// ?hash=, so a root read back from a store others write (Redis, a fleet's)
// is the server's or nothing: another writer files another cluster's root
// there, fresh for an hour, under this server's key; Paths and Raw answer
// the server's root (a request is sent, with no-cache: a 304 to an ETag
// would confirm the entry, and kube-apiserver's root has none), and a
// shared store's root is not answered while the server is unavailable
// (WithStaleRootOnError keeps it in a *diskcache.Cache only). The user's
// own *diskcache.Cache answers its fresh entry with no request, as before:
// its directory is trusted. Before, the shared store's entry was answered
// with no request.
func TestSharedStoreRootIsTheServers(t *testing.T) {
	other, err := docserver.NewServer(docserver.WithCRDs(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	var forging atomic.Bool
	var roots atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi/v3" {
			roots.Add(1)
			if forging.Load() {
				w.Header().Set("Cache-Control", "max-age=3600")
				other.ServeHTTP(w, r)
				return
			}
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ctx := context.Background()
	truth, err := clientOf(t, ts.URL).Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := diskcache.Open(t.TempDir(), ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The other writer stores the other cluster's root under openapi3's
	// key for this server's root (diskcache's transport stores a root
	// with a lifetime).
	writer := &http.Client{Transport: diskcache.NewTransport(nil, dc, diskcache.WithKey(storeKey))}
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/openapi/v3", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	forging.Store(true)
	resp, err := writer.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	forging.Store(false)
	if dc.Stats().Writes != 1 {
		t.Fatalf("the other writer stored nothing: %+v", dc.Stats())
	}

	roots.Store(0)
	got, err := clientOf(t, ts.URL, WithDiskCache(sharedStore{dc})).Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, truth) || roots.Load() != 1 {
		t.Errorf("Paths from a shared store: %d paths after %d root requests, want the server's %d after one", len(got), roots.Load(), len(truth))
	}
	roots.Store(0)
	raw, err := clientOf(t, ts.URL, WithDiskCache(sharedStore{dc})).Raw(ctx, "/openapi/v3", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	if root, err := parseRoot(raw, DefaultMaxPaths); err != nil || !maps.Equal(root, truth) || roots.Load() != 1 {
		t.Errorf("Raw of the root from a shared store: %d paths (%v) after %d root requests, want the server's %d after one", len(root), err, roots.Load(), len(truth))
	}

	// The user's own directory is trusted: its fresh entry is answered.
	forging.Store(true)
	resp, err = writer.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	forging.Store(false)
	roots.Store(0)
	if own, err := clientOf(t, ts.URL, WithDiskCache(dc)).Paths(ctx); err != nil || maps.Equal(own, truth) || roots.Load() != 0 {
		t.Errorf("Paths from the user's own cache: %v, the server's: %v, %d root requests; want its entry, with none", err, maps.Equal(own, truth), roots.Load())
	}

	// A kept root (WithStaleRootOnError, written by a client of the
	// user's own cache) is not answered from a shared store while the
	// server is unavailable.
	dc.Delete(storeKey(req))
	if _, err := clientOf(t, ts.URL, WithDiskCache(dc), WithStaleRootOnError()).RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("/openapi/v3", docserver.Fault{Status: http.StatusServiceUnavailable})
	for name, store := range map[string]diskcache.Store{"own": dc, "shared": sharedStore{dc}} {
		c := clientOf(t, ts.URL, WithDiskCache(store), WithStaleRootOnError(), WithMaxRetries(0))
		root, err := c.Paths(ctx)
		if answered := err == nil && root != nil; answered != (name == "own") || answered != (c.StaleRoot() != nil) {
			t.Errorf("%s store, server unavailable: %d paths, %v, stale %v; want the kept root from the user's own cache only", name, len(root), err, c.StaleRoot())
		}
	}
}

// TestRawChecksSharedEntries: Raw hands a JSON document read back from a
// store others write on only once its SHA-512 is its ?hash=, as Document
// does: a forged entry is dropped and the server's document read, once.
func TestRawChecksSharedEntries(t *testing.T) {
	const path = "apis/apps/v1"
	base, u, dc := plantForgedEntry(t, path)
	ctx := context.Background()

	body, err := clientOf(t, base, WithDiskCache(sharedStore{dc})).Raw(ctx, u, "application/json")
	if err != nil {
		t.Fatalf("a foreign entry made Raw fail: %v", err)
	}
	if strings.Contains(string(body), "forged") {
		t.Errorf("Raw handed on a foreign entry that is not its hash's")
	}
	body, err = clientOf(t, base, WithDiskCache(sharedStore{dc})).Raw(ctx, u, "application/json")
	if err != nil || strings.Contains(string(body), "forged") {
		t.Errorf("the next Raw: %v (forged: %v): the real document was not filed in its place", err, err == nil && strings.Contains(string(body), "forged"))
	}
}

// clientOf is a client of base, failing the test if it cannot be built.
func clientOf(t *testing.T, base string, opts ...Option) *Client {
	t.Helper()
	c, err := NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSharedStoreUncheckedDocumentsAreTheServers: a protobuf document,
// whose bytes no hash names, is neither read from nor written to a store
// others write: whatever it holds (here a good document, which the
// user's own cache stored) is not answered, the server is asked. The
// user's own *diskcache.Cache answers it with no request, as before.
func TestSharedStoreUncheckedDocumentsAreTheServers(t *testing.T) {
	const path = "apis/apps/v1"
	srv, base := docserver.Start(t, docserver.WithCRDs(5, 1))
	dc, err := diskcache.Open(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := clientOf(t, base, WithDiskCache(dc)).Gnostic(ctx, path); err != nil {
		t.Fatal(err)
	}
	writes := dc.Stats().Writes
	fetched := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Path == "/openapi/v3/"+path && strings.Contains(r.Accept, "protobuf") {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name  string
		store diskcache.Store
		want  int // requests for the protobuf document
	}{
		{"own", dc, 0},
		{"shared", sharedStore{dc}, 1},
	} {
		srv.ResetRequests()
		c := clientOf(t, base, WithDiskCache(tc.store))
		if _, err := c.Gnostic(ctx, path); err != nil {
			t.Fatal(err)
		}
		if got := fetched(); got != tc.want {
			t.Errorf("%s store: the protobuf document asked of the server %d times by Gnostic, want %d", tc.name, got, tc.want)
		}
		u, err := c.urlFor(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		srv.ResetRequests()
		if _, err := clientOf(t, base, WithDiskCache(tc.store)).Raw(ctx, u, ProtobufType+", "+ProtobufTypeDeprecated); err != nil {
			t.Fatal(err)
		}
		if got := fetched(); got != tc.want {
			t.Errorf("%s store: the protobuf document asked of the server %d times by Raw, want %d", tc.name, got, tc.want)
		}
	}
	if w := dc.Stats().Writes; w != writes {
		t.Errorf("%d writes after the reads, want none (a shared store is not written protobuf)", w-writes)
	}
}

// TestFromShared pins what a request may take from a store others write:
// a JSON document at a ?hash= of kube-openapi's form (checked on read),
// the root only as the server confirms it, nothing else.
func TestFromShared(t *testing.T) {
	hash := strings.Repeat("AB", 64) // a SHA-512 in kube-openapi's form
	for _, tc := range []struct {
		ref, accept         string
		revalidate, noStore bool
	}{
		{"/openapi/v3", "application/json", true, false},
		{"/k8s/clusters/c1/openapi/v3/", "application/json", true, false},
		{"/openapi/v3/apis/apps/v1?hash=" + hash, "application/json", false, false},
		{"/openapi/v3/apis/apps/v1?hash=" + hash, ProtobufType, false, true},
		{"/openapi/v3/apis/apps/v1?hash=" + hash, ProtobufType + ", " + ProtobufTypeDeprecated, false, true},
		{"/openapi/v3/apis/apps/v1?hash=abc", "application/json", false, true},
		{"/openapi/v3/apis/apps/v1", "application/json", false, true},
		{"%zz", "application/json", false, true},
	} {
		if r, n := fromShared(tc.ref, tc.accept); r != tc.revalidate || n != tc.noStore {
			t.Errorf("fromShared(%q, %q) = revalidate %v, no-store %v; want %v, %v", tc.ref, tc.accept, r, n, tc.revalidate, tc.noStore)
		}
	}
}

// plantForgedEntry starts a server of path's document and has another
// writer of a disk cache (another cluster of a fleet, another host's
// Redis) file a forged document for it under openapi3's key, unchecked:
// what a reader of that store must not hand on. It returns the server's
// base URL, the document's URL as the root lists it, and the cache.
func plantForgedEntry(t *testing.T, path string) (base, u string, dc *diskcache.Cache) {
	t.Helper()
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(`{"openapi":"3.0.0","paths":{},"components":{"schemas":{"forged":{}}}}`)
	var forging atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forging.Load() && r.URL.Path == "/openapi/v3/"+path {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, r)
			maps.Copy(w.Header(), rec.Header())
			w.Header().Set("Content-Length", strconv.Itoa(len(forged)))
			w.Write(forged)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	if dc, err = diskcache.Open(t.TempDir(), ts.URL); err != nil {
		t.Fatal(err)
	}
	if u, err = clientOf(t, ts.URL).urlFor(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	unchecked := &http.Client{Transport: diskcache.NewTransport(nil, dc, diskcache.WithKey(storeKey),
		diskcache.WithCheck(func(*http.Response, []byte) error { return nil }))}
	req, err := http.NewRequest(http.MethodGet, ts.URL+u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	forging.Store(true)
	resp, err := unchecked.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	forging.Store(false)
	return ts.URL, u, dc
}

package openapi3_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// largeDocuments serves a root of n documents, each a valid JSON document
// of size bytes at its own ?hash= (immutable, as kube-apiserver serves
// them), without a Content-Length, so that only reading tells its size.
func largeDocuments(t testing.TB, n, size int) string {
	t.Helper()
	pad := size - len(`{"openapi":"3.0.0","x":""}`)
	doc := []byte(`{"openapi":"3.0.0","x":"` + strings.Repeat("a", pad) + `"}`)
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	var root bytes.Buffer
	root.WriteString(`{"paths":{`)
	for i := range n {
		if i > 0 {
			root.WriteString(",")
		}
		fmt.Fprintf(&root, `"apis/g%d/v1":{"serverRelativeURL":"/openapi/v3/apis/g%d/v1?hash=%s"}`, i, i, hash)
	}
	root.WriteString(`}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			w.Write(root.Bytes())
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")
		w.Header().Set("ETag", `"`+hash+`"`)
		for b := doc; len(b) > 0; { // chunked: no Content-Length
			k := min(len(b), 64<<10)
			if _, err := w.Write(b[:k]); err != nil {
				return
			}
			b = b[k:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// allocated is how many bytes fn allocated (the heap's cumulative count:
// an upper bound of what fn held at its peak, whatever the GC did).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMemoryWithDiskCacheWithinLimit: with the disk cache on, reading a
// document costs at most twice the size limit (WithMaxResponseBytes), in
// all it allocates, whether the document is over the limit (refused) or
// under it (three quarters: read, verified, stored); and FetchAll over documents
// that are all over the limit costs at most about the limit per document.
// The caching transport keeps no copy of its own of what the client reads
// (on main it did, outside the limit: 4.5 times the limit on one
// oversized document).
func TestMemoryWithDiskCacheWithinLimit(t *testing.T) {
	const limit = 8 << 20
	ctx := context.Background()
	client := func(t *testing.T, base string) *openapi3.Client {
		dc, err := diskcache.Open(t.TempDir(), base, diskcache.WithMaxBytes(1<<30))
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, base, openapi3.WithDiskCache(dc), openapi3.WithMaxResponseBytes(limit))
	}
	t.Run("one oversized document", func(t *testing.T) {
		c := client(t, largeDocuments(t, 1, 3*limit))
		if _, err := c.Paths(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		got := allocated(func() { _, err = c.Document(ctx, "apis/g0/v1") })
		if !errors.Is(err, openapi3.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		t.Logf("%d MiB allocated", got>>20)
		if got > 2*limit {
			t.Errorf("an oversized document allocated %d MiB, over twice the %d MiB limit", got>>20, limit>>20)
		}
	})
	t.Run("one document under the limit", func(t *testing.T) {
		c := client(t, largeDocuments(t, 1, limit*3/4))
		if _, err := c.Paths(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		got := allocated(func() { _, err = c.Document(ctx, "apis/g0/v1") })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d MiB allocated", got>>20)
		if got > 2*limit {
			t.Errorf("a document under the limit allocated %d MiB, over twice the %d MiB limit", got>>20, limit>>20)
		}
	})
	t.Run("FetchAll of oversized documents", func(t *testing.T) {
		const n = 4
		c := client(t, largeDocuments(t, n, 3*limit))
		if _, err := c.Paths(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		got := allocated(func() { _, err = c.FetchAll(ctx) })
		if !errors.Is(err, openapi3.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		t.Logf("%d MiB allocated", got>>20)
		if got > n*(limit+limit/2) {
			t.Errorf("FetchAll of %d oversized documents allocated %d MiB, over 1.5 times the %d MiB limit each", n, got>>20, limit>>20)
		}
	})
}

// BenchmarkMemoryAgainstLimit reports what reading one document
// allocates, in multiples of the size limit, with and without the disk
// cache, for a document three quarters of the limit (read, verified,
// stored) and one over it (refused): the disk cache's figure should stay
// within 2 (it was 4.5 over the limit when the transport kept a copy of
// its own). TotalAlloc bounds the peak from above.
func BenchmarkMemoryAgainstLimit(b *testing.B) {
	const limit = 32 << 20
	ctx := context.Background()
	for _, size := range []struct {
		name  string
		bytes int
	}{{"three-quarters", limit * 3 / 4}, {"oversized", limit + limit/2}} {
		base := largeDocuments(b, 1, size.bytes)
		for _, cached := range []bool{false, true} {
			name := size.name + "/no-cache"
			if cached {
				name = size.name + "/disk-cache"
			}
			b.Run(name, func(b *testing.B) {
				var total uint64
				for b.Loop() {
					opts := []openapi3.Option{openapi3.WithMaxResponseBytes(limit)}
					if cached {
						dc, err := diskcache.Open(b.TempDir(), base, diskcache.WithMaxBytes(1<<30))
						if err != nil {
							b.Fatal(err)
						}
						opts = append(opts, openapi3.WithDiskCache(dc))
					}
					c, err := openapi3.NewForHTTPClient(nil, base, opts...)
					if err != nil {
						b.Fatal(err)
					}
					total += allocated(func() { _, _ = c.Document(ctx, "apis/g0/v1") })
				}
				b.ReportMetric(float64(total)/float64(b.N)/limit, "limit-multiples/op")
			})
		}
	}
}

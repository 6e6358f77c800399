package openapi3

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
)

// TestEachDocumentHashedAndDecodedOnce: a JSON document's SHA-512 is
// computed once on its way to the disk cache (by the cache's check, which
// hands its verdict to the caller) and not at all on its way back (the
// cache stored it verified); a protobuf document is decoded once either
// way (the check's decoding is the one returned). Without a disk cache,
// once each too.
func TestEachDocumentHashedAndDecodedOnce(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	ctx := context.Background()
	dir := t.TempDir()
	newClient := func(t *testing.T, disk bool) *Client {
		var opts []Option
		if disk {
			dc, err := diskcache.Open(dir, base)
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, WithDiskCache(dc))
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
	if _, err := warm.FetchAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Gnostic(ctx, pbPath); err != nil {
		t.Fatal(err)
	}
	want(t, "warm disk cache", warm, 0, 1)

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

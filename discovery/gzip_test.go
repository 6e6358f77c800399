package discovery

import (
	"context"
	"testing"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestCompressedDiscovery: large documents arrive gzipped (the API server
// compresses above 128 KiB); they decode like uncompressed ones, and Stats
// counts the bytes on the wire.
func TestCompressedDiscovery(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(1000, 80))
	c, _ := NewForHTTPClient(nil, base, WithJSONOnly())
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range s.Groups() {
		for _, v := range g.Versions {
			n += len(v.Resources)
		}
	}
	if n < 1000 {
		t.Fatalf("%d resources", n)
	}
	if b := c.Stats().Bytes; b > 200<<10 {
		t.Errorf("%d bytes read for about 600 KB of JSON: not compressed?", b)
	}
}

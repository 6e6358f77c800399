package discovery

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func gz(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func TestGunzip(t *testing.T) {
	data := bytes.Repeat([]byte("discovery "), 100000)
	good := gz(t, data)
	if out, err := gunzip(good, 1<<30); err != nil || !bytes.Equal(out, data) {
		t.Fatalf("round trip: %v", err)
	}
	lying := bytes.Clone(good)
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 10) // claims 10 bytes
	if _, err := gunzip(lying, 1<<30); err == nil {
		t.Errorf("a wrong size trailer went unnoticed") // gzip checks ISIZE
	}
	if out, _ := gunzip(good, 1000); len(out) > 1000 {
		t.Errorf("read %d bytes past a limit of 1000", len(out))
	}
	if _, err := gunzip([]byte("not gzip"), 1<<20); err == nil {
		t.Errorf("garbage decompressed")
	}
}

// TestCompressedDiscovery: large documents arrive gzipped (the API server
// compresses above 128 KiB); they decode like uncompressed ones, and Stats
// counts the bytes on the wire.
func TestCompressedDiscovery(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(1000, 80))
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

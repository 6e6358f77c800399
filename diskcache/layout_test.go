package diskcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestCompactionDropsOlderFormats: caches written before keys had Versions
// hold entries of format 2, one file per OpenAPI ?hash=, which no Get finds
// any more; compaction removes them and keeps the entries of this format.
func TestCompactionDropsOlderFormats(t *testing.T) {
	c, err := Open(t.TempDir(), "https://h")
	if err != nil {
		t.Fatal(err)
	}
	// Format 2: magic, CRC-32C, key length, value length, key, value.
	formatTwo := func(key string, value []byte) []byte {
		buf := make([]byte, 24)
		copy(buf, []byte{'k', 'a', 't', 'l', 'a', 's', 0, 2})
		binary.LittleEndian.PutUint32(buf[12:], uint32(len(key)))
		binary.LittleEndian.PutUint64(buf[16:], uint64(len(value)))
		return append(append(buf, key...), value...)
	}
	var old []string
	for _, hash := range []string{"A1", "B2", "C3"} {
		key := "https://h/openapi/v3/apis/apps/v1?hash=" + hash + "\napplication/json"
		sum := sha256.Sum256([]byte(key))
		h := hex.EncodeToString(sum[:16])
		path := filepath.Join(c.dir, h[:2], h)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, formatTwo(key, []byte("doc")), 0o600); err != nil {
			t.Fatal(err)
		}
		old = append(old, path)
	}
	live := Key{Name: "apis/apps/v1", Version: "D4"}
	if err := c.Put(live, []byte("doc")); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("an entry of format 2 is left: %s", p)
		}
	}
	if _, n := c.Usage(); n != 1 {
		t.Errorf("%d entries after compaction, want the live one", n)
	}
	if v, ok := c.Get(live); !ok || string(v) != "doc" {
		t.Errorf("the entry of this format: %q %v", v, ok)
	}
}

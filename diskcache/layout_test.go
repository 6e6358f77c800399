package diskcache

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCompactionDropsOldLayoutDocuments: caches written before documents
// were named by their path hold one file per ?hash=; compaction keeps the
// newest of each path.
func TestCompactionDropsOldLayoutDocuments(t *testing.T) {
	c, err := Open(t.TempDir(), "https://h")
	if err != nil {
		t.Fatal(err)
	}
	oldName := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		h := hex.EncodeToString(sum[:16])
		return filepath.Join(c.dir, h[:2], h)
	}
	base := time.Now().Add(-time.Hour)
	for i, hash := range []string{"A1", "B2", "C3"} {
		key := Key("https://h/openapi/v3/apis/apps/v1?hash="+hash, "application/json")
		path := oldName(key)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, encode(key, []byte("doc")), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute))
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	if _, n := c.Usage(); n != 1 {
		t.Fatalf("%d entries after compaction, want the newest document's", n)
	}
	if _, err := os.Stat(oldName(Key("https://h/openapi/v3/apis/apps/v1?hash=C3", "application/json"))); err != nil {
		t.Errorf("the newest document went: %v", err)
	}
}

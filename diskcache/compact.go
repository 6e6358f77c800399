package diskcache

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// staleTemp is how old a temporary file must be before compaction treats it
// as left behind by a writer that died.
const staleTemp = 10 * time.Minute

type diskEntry struct {
	path string
	name string
	size int64
	used time.Time
	key  string
}

// Compact brings the cache within its bounds. First it removes OpenAPI
// documents whose ?hash= was superseded by a newer document of the same
// path (and Accept), then the least recently used entries, down to nine
// tenths of each bound so that the next writes do not compact again at
// once. One process compacts at a time (an advisory lock); if another is
// compacting, Compact returns at once. Readers in any process are never
// broken: an entry is removed whole or not at all.
func (c *Cache) Compact() error {
	unlock, ok, err := lockDir(filepath.Join(c.dir, ".lock"))
	if err != nil {
		return fmt.Errorf("diskcache: lock: %w", err)
	}
	if !ok {
		return nil
	}
	defer unlock()

	entries, err := c.listEntries()
	if err != nil {
		return err
	}
	var remove []diskEntry
	// Files of the layout before documents were named by path (one file
	// per ?hash=) are superseded by the newer file of their path.
	entries, remove = supersededOpenAPI(entries)

	c.mu.Lock()
	maxBytes, maxEntries := c.opts.maxBytes*9/10, c.opts.maxEntries*9/10
	c.mu.Unlock()
	var total int64
	for _, e := range entries {
		total += e.size
	}
	slices.SortFunc(entries, func(a, b diskEntry) int { return a.used.Compare(b.used) })
	for len(entries) > 0 && (total > maxBytes || len(entries) > maxEntries) {
		remove = append(remove, entries[0])
		total -= entries[0].size
		entries = entries[1:]
	}
	for _, e := range remove {
		if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.opts.logger.Warn("diskcache: could not evict entry", "path", e.path, "err", err)
			continue
		}
		c.forget(e.name)
		c.count(func(s *Stats) { s.Evictions++ })
	}
	// Re-learn sizes from disk: other processes write here too.
	return c.scan()
}

// listEntries reads every entry's header (for its key) and its recency: the
// later of its modification time and this process's last use.
func (c *Cache) listEntries() ([]diskEntry, error) {
	c.mu.Lock()
	used := make(map[string]time.Time, len(c.entries))
	for name, e := range c.entries {
		used[name] = e.used
	}
	c.mu.Unlock()
	var out []diskEntry
	err := c.walk(func(e diskEntry) {
		if u, ok := used[e.name]; ok && u.After(e.used) {
			e.used = u
		}
		e.key = readKey(e.path)
		out = append(out, e)
	})
	return out, err
}

// readKey reads the key from an entry's header, or "" for an unreadable one.
func readKey(path string) string {
	f, _, kl, err := openEntry(path)
	if err != nil || kl > 1<<16 {
		return ""
	}
	defer f.Close()
	key := make([]byte, kl)
	if _, err := io.ReadFull(f, key); err != nil {
		return ""
	}
	return string(key)
}

// supersededOpenAPI splits off the OpenAPI v3 documents that a newer
// document of the same path and Accept replaced: every schema change gives
// a group-version a new ?hash= URL, and nothing ever asks for the old one.
func supersededOpenAPI(entries []diskEntry) (keep, remove []diskEntry) {
	newest := map[string]int{}
	for i, e := range entries {
		id, ok := DocumentIdentity(e.key)
		if !ok {
			continue
		}
		if j, seen := newest[id]; !seen || cmp.Compare(e.used.UnixNano(), entries[j].used.UnixNano()) > 0 {
			newest[id] = i
		}
	}
	for i, e := range entries {
		if id, ok := DocumentIdentity(e.key); ok && newest[id] != i {
			remove = append(remove, e)
			continue
		}
		keep = append(keep, e)
	}
	return keep, remove
}

// DocumentIdentity is an OpenAPI v3 document's identity at every ?hash=:
// its path and Accept, from a key written by NewTransport (Key: "<URL>\n
// <Accept>"); false for any other key. The server's URL may have a path
// prefix (a fleet proxy's /k8s/clusters/<id>). A Cache keeps one file per
// identity, the newest hash; another Store may do the same (redisstore
// does).
func DocumentIdentity(key string) (string, bool) {
	rawURL, accept, _ := strings.Cut(key, "\n")
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(u.Path, "/openapi/v3/") || u.Query().Get("hash") == "" {
		return "", false
	}
	return u.Path + "\n" + accept, true
}

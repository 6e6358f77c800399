package diskcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	// readable: the file has a header of this format (compaction reads
	// it; Open does not, for speed).
	readable bool
}

// Compact brings the cache within its bounds. First it removes files that
// are not entries of this format (an older version's: before keys had
// Versions, an OpenAPI document had a file per ?hash=), then the least
// recently used entries, down to nine tenths of each bound so that the
// next writes do not compact again at once. One process compacts at a
// time (an advisory lock); while another holds the lock (for as long as it
// does, or for good), Compact does not wait: it evicts, without the lock,
// from the entries this process knows (those it found at Open and those it
// wrote), least recently used first, so that the bounds hold whoever holds
// the lock. Readers in any process are never broken: an entry is removed
// whole or not at all.
func (c *Cache) Compact() error {
	if c.unsafe != nil {
		return nil
	}
	unlock, ok, err := lockDir(filepath.Join(c.dir, ".lock"))
	if err != nil {
		return fmt.Errorf("diskcache: lock: %w", err)
	}
	if !ok {
		c.evictKnown()
		return nil
	}
	defer unlock()

	entries, err := c.listEntries()
	if err != nil {
		return err
	}
	var remove []diskEntry
	entries = slices.DeleteFunc(entries, func(e diskEntry) bool {
		if !e.readable {
			remove = append(remove, e)
		}
		return !e.readable
	})

	c.evict(append(remove, c.leastRecentlyUsed(entries)...))
	// Re-learn sizes from disk: other processes write here too.
	return c.scan()
}

// evictKnown brings the entries this process knows within nine tenths of
// the bounds, least recently used first, without the lock and without
// reading the directory: removing a file is atomic, so the worst a
// compaction running meanwhile in another process can do with it is evict
// more than either would alone, or remove an entry just rewritten (a
// miss).
func (c *Cache) evictKnown() {
	c.mu.Lock()
	entries := make([]diskEntry, 0, len(c.entries))
	for name, e := range c.entries {
		entries = append(entries, diskEntry{path: filepath.Join(c.dir, name[:2], name), name: name, size: e.size, used: e.used})
	}
	c.mu.Unlock()
	c.evict(c.leastRecentlyUsed(entries))
}

// leastRecentlyUsed returns the least recently used of entries, as many as
// must go for the rest to be within nine tenths of each bound (so that the
// next writes do not compact again at once). It sorts entries.
func (c *Cache) leastRecentlyUsed(entries []diskEntry) []diskEntry {
	c.mu.Lock()
	maxBytes, maxEntries := c.opts.maxBytes*9/10, c.opts.maxEntries*9/10
	c.mu.Unlock()
	var total int64
	for _, e := range entries {
		total += e.size
	}
	slices.SortFunc(entries, func(a, b diskEntry) int { return a.used.Compare(b.used) })
	n := 0
	for ; n < len(entries) && (total > maxBytes || len(entries)-n > maxEntries); n++ {
		total -= entries[n].size
	}
	return entries[:n]
}

// evict removes entries' files and forgets them, counting each eviction.
func (c *Cache) evict(entries []diskEntry) {
	for _, e := range entries {
		if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.opts.logger.Warn("diskcache: could not evict entry", "path", e.path, "err", err)
			continue
		}
		c.forget(e.name)
		c.count(func(s *Stats) { s.Evictions++ })
	}
}

// listEntries reads every entry's header (whether it is of this format) and
// its recency: the later of its modification time and this process's last
// use.
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
		e.readable = readable(e.path)
		out = append(out, e)
	})
	return out, err
}

// readable says whether the file at path is an entry of this format: its
// header and key read (not its value: compaction does not read every value).
func readable(path string) bool {
	f, _, _, err := openEntry(path)
	if err != nil {
		// A file that cannot be opened at all (another process removed
		// it) is not ours to remove either.
		return !errors.Is(err, errCorrupt) && !errors.As(err, new(*unsafeEntry))
	}
	f.Close()
	return true
}

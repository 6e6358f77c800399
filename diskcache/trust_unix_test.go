//go:build unix

package diskcache_test

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// anotherUID owns what "another user" prepared, when the tests run as
// root (chown needs it).
const anotherUID = 12345

// TestUnsafeDirs: a cache directory another user may have prepared or may
// still change (not the user's, writable by group or others, below a
// directory anyone may write that is not sticky) is not used: a planted
// entry is not served (it was, every run, confirmed by the server's 304s),
// nothing there is written or removed, the refusal is said once, and the
// program goes on without a cache. A sticky ancestor (/tmp) is fine.
func TestUnsafeDirs(t *testing.T) {
	const server = "https://cluster.example.com:6443"
	key := diskcache.Key{Name: "kubeatlas/discovery/v1\napplication/json"}
	planted := []byte("a planted snapshot")
	// plant writes a valid entry for key into dir, as another user would:
	// made by a cache of their own, copied in.
	plant := func(t *testing.T, dir string) string {
		t.Helper()
		src := open(t, t.TempDir())
		if err := src.Put(key, planted); err != nil {
			t.Fatal(err)
		}
		files := entryFiles(t, src.Dir())
		rel, _ := filepath.Rel(src.Dir(), files[0])
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	chown := func(t *testing.T, path string) {
		t.Helper()
		if os.Geteuid() != 0 {
			t.Skip("simulating another user's directory needs root (chown)")
		}
		if err := filepath.Walk(path, func(p string, _ fs.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, anotherUID, anotherUID)
		}); err != nil {
			t.Fatal(err)
		}
	}
	chmod := func(t *testing.T, path string, mode fs.FileMode) {
		t.Helper()
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// prepare sets up root (below base) and returns the planted file.
		prepare func(t *testing.T, base, root, dir string) string
		refused string // what the warning names; "" when the cache is used
	}{
		{"cluster directory the user's, mode 0777", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, dir, 0o777)
			return p
		}, "writable by group or others"},
		{"cluster directory another user's", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, dir, 0o777)
			chown(t, dir)
			return p
		}, "owned by uid 12345"},
		{"cluster directory another user's, mode 0700", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chown(t, dir)
			return p
		}, "owned by uid 12345"},
		{"entry subdirectory anyone may write", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, filepath.Dir(p), 0o777)
			return p
		}, "writable by group or others"},
		{"root anyone may write, not sticky", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, root, 0o777)
			return p
		}, "writable by group or others, and not sticky"},
		{"ancestor anyone may write, not sticky", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, base, 0o777)
			return p
		}, "writable by group or others, and not sticky"},
		{"group-writable root", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, root, 0o770)
			return p
		}, "writable by group or others, and not sticky"},
		{"ancestor anyone may write, sticky", func(t *testing.T, base, root, dir string) string {
			p := plant(t, dir)
			chmod(t, base, 0o777|fs.ModeSticky)
			return p
		}, ""},
		{"the user's, 0700", func(t *testing.T, base, root, dir string) string {
			return plant(t, dir)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "base")
			root := filepath.Join(base, "cache")
			dir := filepath.Join(root, diskcache.ClusterDir(server))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			plantedFile := tc.prepare(t, base, root, dir)
			var log logged
			c, err := diskcache.Open(root, server, diskcache.WithLogger(log.logger()))
			if err != nil {
				t.Fatalf("Open failed instead of going on without the cache: %v", err)
			}
			v, hit := c.Get(key)
			if tc.refused == "" {
				if !hit || string(v) != string(planted) || c.Unsafe() != nil {
					t.Errorf("a safe directory: Get = %q, %v; Unsafe = %v", v, hit, c.Unsafe())
				}
				return
			}
			if hit {
				t.Fatalf("the planted entry was served: %q", v)
			}
			for i := range 3 {
				if err := c.Put(diskcache.Key{Name: fmt.Sprint("k", i)}, []byte("v")); !errors.Is(err, diskcache.ErrUnsafeDir) {
					t.Errorf("Put = %v, want ErrUnsafeDir", err)
				}
				c.Delete(key)
				c.Get(key)
			}
			if err := c.Compact(); err != nil {
				t.Errorf("Compact = %v", err)
			}
			if b, err := os.ReadFile(plantedFile); err != nil || !strings.Contains(string(b), string(planted)) {
				t.Errorf("the planted file was changed or removed: %v", err)
			}
			if files := entryFiles(t, dir); len(files) != 1 {
				t.Errorf("%d entry files in the refused directory, want the planted one alone", len(files))
			}
			if err := c.Unsafe(); !errors.Is(err, diskcache.ErrUnsafeDir) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("Unsafe = %v, want ErrUnsafeDir saying %q", err, tc.refused)
			}
			if n := strings.Count(log.String(), "not using a cache directory"); n != 1 || !strings.Contains(log.String(), tc.refused) {
				t.Errorf("%d warnings, want 1 saying %q:\n%s", n, tc.refused, log.String())
			}
		})
	}
}

// TestUnsafeDirWarnsWithoutALogger: the refusal is said on slog.Default()
// when the caller gave no logger: a cache that silently does nothing would
// leave the user wondering.
func TestUnsafeDirWarnsWithoutALogger(t *testing.T) {
	var log logged
	old := slog.Default()
	slog.SetDefault(log.logger())
	defer slog.SetDefault(old)
	root := t.TempDir()
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	c, err := diskcache.Open(root, "https://cluster.example.com:6443")
	if err != nil {
		t.Fatal(err)
	}
	if c.Unsafe() == nil || !strings.Contains(log.String(), "not using a cache directory") {
		t.Errorf("Unsafe = %v; logged %q", c.Unsafe(), log.String())
	}
}

// TestBoundHoldsWhileLockIsHeld: while another process holds the
// compaction lock (for good, here), a process's writes still keep the
// cache within its bounds: it evicts what it knows without the lock. (200
// entries were kept with a limit of 20.)
func TestBoundHoldsWhileLockIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []diskcache.Option
		ok   func(bytes int64, entries int) bool
	}{
		{"entries", []diskcache.Option{diskcache.WithMaxEntries(20)}, func(_ int64, n int) bool { return n <= 20 }},
		{"bytes", []diskcache.Option{diskcache.WithMaxBytes(20 << 10)}, func(b int64, _ int) bool { return b <= 20<<10 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, t.TempDir(), tc.opts...)
			// Another open file description: flock conflicts with it as
			// with another process's.
			f, err := os.OpenFile(filepath.Join(c.Dir(), ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			value := make([]byte, 1000)
			for i := range 200 {
				if err := c.Put(diskcache.Key{Name: fmt.Sprint("key", i)}, value); err != nil {
					t.Fatal(err)
				}
			}
			var total int64
			files := entryFiles(t, c.Dir())
			for _, p := range files {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				total += info.Size()
			}
			if !tc.ok(total, len(files)) {
				t.Errorf("with the lock held elsewhere, 200 writes left %d entries, %d bytes", len(files), total)
			}
			// The newest stay.
			if _, ok := c.Get(diskcache.Key{Name: "key199"}); !ok {
				t.Error("the newest entry was evicted")
			}
			if st := c.Stats(); st.Evictions == 0 {
				t.Errorf("Stats = %+v, want evictions", st)
			}
		})
	}
}

// TestUnsafeEntryFiles: an entry file inside the user's own directories
// that another user may write (group- or world-writable, or another
// user's) is not served, neither by a cache that wrote it (the warm path)
// nor by one opened afterwards, and is removed so that the next Put
// stores the entry again; the user's own 0644 file (others may read it,
// not write it) is served. On c7f0643 the rewritten entry was served.
func TestUnsafeEntryFiles(t *testing.T) {
	key := diskcache.Key{Name: "kubeatlas/discovery/v1\napplication/json"}
	honest, hostile := []byte("the user's snapshot"), []byte("another user's snapshot")
	// rewrite replaces the entry at path in place (as another user who
	// may write the file would: its inode, owner and mode stay) with a
	// valid entry for key holding hostile.
	rewrite := func(t *testing.T, path string) {
		t.Helper()
		src := open(t, t.TempDir())
		if err := src.Put(key, hostile); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(entryFiles(t, src.Dir())[0])
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
		refused string // what the warning names; "" when the entry is used
	}{
		{"mode 0666", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"mode 0620", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o620); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"another user's, mode 0600", func(t *testing.T, p string) {
			if err := os.Lchown(p, anotherUID, anotherUID); err != nil {
				if errors.Is(err, fs.ErrPermission) {
					t.Skip("simulating another user's file needs chown (root)")
				}
				t.Fatal(err)
			}
		}, "owned by uid 12345"},
		{"the user's, mode 0644", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var log logged
			c := open(t, root, diskcache.WithLogger(log.logger()))
			if err := c.Put(key, honest); err != nil {
				t.Fatal(err)
			}
			path := entryFiles(t, c.Dir())[0]
			tc.prepare(t, path)
			rewrite(t, path)
			if tc.refused == "" {
				if v, ok := c.Get(key); !ok || string(v) != string(hostile) {
					t.Fatalf("the user's own file: Get = %q, %v", v, ok)
				}
				if c2 := open(t, root); c2.Unsafe() != nil {
					t.Fatalf("Unsafe = %v", c2.Unsafe())
				} else if _, ok := c2.Get(key); !ok {
					t.Fatal("the user's own file was not served after Open")
				}
				return
			}
			// The warm path: this process wrote the entry.
			if v, ok := c.Get(key); ok {
				t.Fatalf("an entry another user may write was served: %q", v)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the unsafe entry was left in place: %v", err)
			}
			if !strings.Contains(log.String(), "another user may write") || !strings.Contains(log.String(), tc.refused) {
				t.Errorf("no warning naming %q:\n%s", tc.refused, log.String())
			}
			if err := c.Put(key, honest); err != nil {
				t.Fatal(err)
			}
			if v, ok := c.Get(key); !ok || string(v) != string(honest) {
				t.Errorf("after a new Put: Get = %q, %v", v, ok)
			}
			// A cache opened later: the scan removes it, Get misses.
			tc.prepare(t, path)
			rewrite(t, path)
			c2 := open(t, root)
			if c2.Unsafe() != nil {
				t.Errorf("an unsafe entry refused the whole directory: %v", c2.Unsafe())
			}
			if v, ok := c2.Get(key); ok {
				t.Fatalf("after Open, an entry another user may write was served: %q", v)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Open's scan left the unsafe entry: %v", err)
			}
			if b, n := c2.Usage(); n != 0 || b != 0 {
				t.Errorf("Usage = %d bytes, %d entries; want the unsafe entry not counted", b, n)
			}
		})
	}
}

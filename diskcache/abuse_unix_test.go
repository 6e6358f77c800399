//go:build unix

package diskcache_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// logged collects a cache's log lines.
type logged struct{ bytes.Buffer }

func (l *logged) logger() *slog.Logger { return slog.New(slog.NewTextHandler(&l.Buffer, nil)) }

// TestSpecialFilesInEntryPlaces: whatever stands where an entry should be,
// Get answers at once with a miss (a symlink to /dev/zero is not read, a
// FIFO does not block), says so once, and the next Put stores the entry.
func TestSpecialFilesInEntryPlaces(t *testing.T) {
	for _, tc := range []struct {
		name  string
		place func(path string) error
	}{
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"symlink to a valid entry elsewhere", func(p string) error {
			other := filepath.Join(filepath.Dir(p), "..", "elsewhere")
			if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
				return err
			}
			return os.Symlink(other, p)
		}},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"directory", func(p string) error { return os.MkdirAll(filepath.Join(p, "inside"), 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log logged
			c := open(t, t.TempDir(), diskcache.WithLogger(log.logger()))
			c.Put(diskcache.Key{Name: "key"}, []byte("value"))
			files := entryFiles(t, c.Dir())
			if len(files) != 1 {
				t.Fatalf("%d files", len(files))
			}
			path := files[0]
			os.Remove(path)
			if err := tc.place(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan bool)
			go func() {
				_, ok := c.Get(diskcache.Key{Name: "key"})
				done <- ok
			}()
			select {
			case ok := <-done:
				if ok {
					t.Fatal("a special file was served as an entry")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Get blocked on a special file")
			}
			c.Get(diskcache.Key{Name: "key"})
			if err := c.Put(diskcache.Key{Name: "key"}, []byte("value")); err != nil {
				t.Fatalf("Put over a special file: %v", err)
			}
			if v, ok := c.Get(diskcache.Key{Name: "key"}); !ok || string(v) != "value" {
				t.Fatalf("after Put: %q %v", v, ok)
			}
			if n := strings.Count(log.String(), "not a regular file"); n != 1 {
				t.Errorf("%d warnings about special files, want 1:\n%s", n, log.String())
			}
		})
	}
}

// TestHousekeepingOnOpen: stale temporary files and files that are not
// entries are removed when a cache is opened, not only when compaction
// runs over the bounds; entries and fresh temporary files stay.
func TestHousekeepingOnOpen(t *testing.T) {
	root := t.TempDir()
	c := open(t, root)
	c.Put(diskcache.Key{Name: "key"}, []byte("value"))
	entry := entryFiles(t, c.Dir())[0]
	sub := filepath.Dir(entry)
	old := time.Now().Add(-time.Hour)
	for i := range 200 {
		junk := filepath.Join(sub, fmt.Sprintf("junk-%d", i))
		os.WriteFile(junk, []byte("x"), 0o600)
		stale := filepath.Join(sub, fmt.Sprintf(".tmp-%d", i))
		os.WriteFile(stale, []byte("x"), 0o600)
		os.Chtimes(stale, old, old)
	}
	os.WriteFile(filepath.Join(c.Dir(), "stray"), []byte("x"), 0o600)
	os.Symlink("/dev/zero", filepath.Join(sub, "0123456789abcdef0123456789abcdef"))
	fresh := filepath.Join(sub, ".tmp-being-written")
	os.WriteFile(fresh, []byte("x"), 0o600)
	keep := filepath.Join(c.Dir(), "not-ours", "file")
	os.MkdirAll(filepath.Dir(keep), 0o700)
	os.WriteFile(keep, []byte("x"), 0o600)

	c2 := open(t, root)
	var left []string
	filepath.WalkDir(c2.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, strings.TrimPrefix(p, c2.Dir()+"/"))
		}
		return nil
	})
	want := map[string]bool{
		strings.TrimPrefix(entry, c2.Dir()+"/"): true,
		strings.TrimPrefix(fresh, c2.Dir()+"/"): true,
		"not-ours/file":                         true,
	}
	for _, f := range left {
		if !want[f] && f != ".lock" {
			t.Errorf("left behind: %s", f)
		}
		delete(want, f)
	}
	for f := range want {
		t.Errorf("removed: %s", f)
	}
	if _, n := c2.Usage(); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
}

// TestUnreadableSubdirectory: a subdirectory the cache cannot read (left by
// another user, say) does not stop Open; it is skipped, said once. As root
// (CI), the opening runs in a child process as the user nobody, since root
// reads every directory.
func TestUnreadableSubdirectory(t *testing.T) {
	if root := os.Getenv("DISKCACHE_OPEN_ROOT"); root != "" {
		var log logged
		if _, err := diskcache.Open(root, "https://cluster.example.com:6443", diskcache.WithLogger(log.logger())); err != nil {
			fmt.Println("OPEN FAILED:", err)
			return
		}
		fmt.Println("OPENED;", log.String())
		return
	}
	base := t.TempDir()
	root := filepath.Join(base, "cache")
	c := open(t, root)
	c.Put(diskcache.Key{Name: "key"}, []byte("value"))
	sub := filepath.Dir(entryFiles(t, c.Dir())[0])
	bin := os.Args[0]
	if os.Geteuid() == 0 { // a copy of the test binary that nobody may run
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(base, "diskcache.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestUnreadableSubdirectory$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "DISKCACHE_OPEN_ROOT="+root)
	if os.Geteuid() == 0 {
		const nobody = 65534
		for dir := root; ; dir = filepath.Dir(dir) {
			os.Chmod(dir, 0o755) // the way down to the cache, for nobody
			if dir == os.TempDir() || dir == "/" {
				break
			}
		}
		filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, nobody, nobody) })
		os.Chown(sub, 0, 0) // another user's
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	os.Chmod(sub, 0)
	defer os.Chmod(sub, 0o700)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OPENED;") {
		t.Fatalf("Open with an unreadable subdirectory failed:\n%s", out)
	}
	if n := strings.Count(string(out), "cannot be read"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, out)
	}
}

// TestWriteFailuresAreSaidOnce: a cache whose directory cannot be written
// (read-only, another owner) logs the first failed write, not every one,
// and reports each failure to the caller.
func TestWriteFailuresAreSaidOnce(t *testing.T) {
	var log logged
	root := t.TempDir()
	c := open(t, root, diskcache.WithLogger(log.logger()))
	// A file where a subdirectory must go makes every write fail, for
	// root too.
	for i := range 256 {
		os.WriteFile(filepath.Join(c.Dir(), fmt.Sprintf("%02x", i)), nil, 0o600)
	}
	failed := 0
	for i := range 5 {
		if c.Put(diskcache.Key{Name: fmt.Sprint("key", i)}, []byte("v")) != nil {
			failed++
		}
		c.Put(diskcache.Key{Name: fmt.Sprint("other", i)}, []byte("v"))
	}
	if failed != 5 || c.Stats().WriteErrors != 10 {
		t.Errorf("%d Put errors, %d write errors counted; want 5 and 10", failed, c.Stats().WriteErrors)
	}
	if n := strings.Count(log.String(), "cannot write"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log.String())
	}
}

//go:build unix

package diskcache_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// TestPermissions: entries 0600, directories 0700, whatever the umask.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	// Made under the umask of 0: a root anyone may write is refused
	// (TestUnsafeDirs).
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	c := open(t, root)
	if err := c.Put(diskcache.Key{Name: "k"}, []byte("v")); err != nil {
		t.Fatal(err)
	}
	var files, dirs int
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
			dirs++
		} else {
			files++
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One entry, in <cluster>/<xx>/: nothing else (no temporary file, no
	// lock) is left behind, and none of it went unchecked.
	if files != 1 || dirs != 2 {
		t.Errorf("walked %d files and %d directories; want 1 entry in <cluster>/<xx>/", files, dirs)
	}
}

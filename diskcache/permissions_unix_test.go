//go:build unix

package diskcache_test

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPermissions: entries 0600, directories 0700, whatever the umask.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	c := open(t, root)
	c.Set("k", []byte("v"))
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		info, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
}

//go:build unix

package diskcache

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// openNoFollow opens path for reading without following a symbolic link
// and without blocking on a FIFO (a reader of a FIFO would wait for a
// writer forever); the caller checks that what it opened is a regular file.
func openNoFollow(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkDirChain says why dir is not safe to keep a cache in (see Open):
// it must be the user's (the effective uid) or root's and writable by no
// one else; every directory above it, up to /, too, unless sticky. Symbolic links are resolved first, so that
// what is checked is where the entries go.
func checkDirChain(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return &unsafeDir{path: dir, why: err.Error()}
	}
	info, err := os.Stat(real)
	if err != nil {
		return &unsafeDir{path: real, why: err.Error()}
	}
	if err := checkOwnDir(real, info); err != nil {
		return err
	}
	uid := uint32(os.Geteuid())
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return &unsafeDir{path: p, why: err.Error()}
		}
		if st.Uid != uid && st.Uid != 0 {
			return &unsafeDir{path: p, why: fmt.Sprintf("owned by uid %d, neither the user (%d) nor root", st.Uid, uid)}
		}
		if st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0 {
			return &unsafeDir{path: p, why: fmt.Sprintf("mode %v: writable by group or others, and not sticky", fs.FileMode(st.Mode&0o777))}
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// checkOwnDir says why a directory the cache writes entries in is not
// safe: neither the user's nor root's (who may write anything anyway), or
// writable by group or others (sticky or not: anyone who may create files
// in it may plant entries).
func checkOwnDir(path string, info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return &unsafeDir{path: path, why: fmt.Sprintf("owned by uid %d, neither the user (%d) nor root", st.Uid, uid)}
	}
	if info.Mode().Perm()&0o022 != 0 {
		return &unsafeDir{path: path, why: fmt.Sprintf("mode %v: writable by group or others", info.Mode().Perm())}
	}
	return nil
}

// checkEntryFile says why an entry file may not be used: neither the
// user's nor root's, or writable by group or others. Another user could
// rewrite such a file after this process wrote it (or plant it), as they
// could a directory's entries; info is the fstat the read makes anyway for
// the file's size, so the check costs no system call.
func checkEntryFile(info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return &unsafeEntry{why: fmt.Sprintf("owned by uid %d, neither the user (%d) nor root", st.Uid, uid)}
	}
	if info.Mode().Perm()&0o022 != 0 {
		return &unsafeEntry{why: fmt.Sprintf("mode %v: writable by group or others", info.Mode().Perm())}
	}
	return nil
}

//go:build unix

package diskcache

import (
	"os"
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

//go:build !unix

package diskcache

import (
	"errors"
	"io/fs"
	"os"
)

// lockDir uses an exclusively created file where flock does not exist. A
// lock left by a process that died is not broken here; compaction is then
// skipped, and the cache stays correct, only unbounded.
func lockDir(path string) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path+".excl", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	f.Close()
	return func() { _ = os.Remove(path + ".excl") }, true, nil
}

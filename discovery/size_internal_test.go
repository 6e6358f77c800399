package discovery

import (
	"testing"
	"unsafe"

	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// TestClientHoldsNoDiskStateWithoutADiskCache: what the disk cache needs
// (the warm start, the writer's state, the unconfirmed snapshot) is held
// only with one (WithDiskCache), and a client is then 448 bytes (a size
// class of Go's allocator; 544, so 576 held, when it kept them inline): a
// process may hold thousands of clients, package shared's identities.
func TestClientHoldsNoDiskStateWithoutADiskCache(t *testing.T) {
	if size := unsafe.Sizeof(Client{}); size > 448 {
		t.Errorf("a Client is %d bytes, want at most 448", size)
	}
	c, err := NewForHTTPClient(nil, "https://size.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if c.disk != nil {
		t.Error("a client without a disk cache holds its state")
	}
	if c, err = NewForHTTPClient(nil, "https://size.invalid", WithDiskCache(&diskcachetest.Memory{})); err != nil {
		t.Fatal(err)
	}
	if c.disk == nil {
		t.Error("a client with a disk cache holds no state for it")
	}
}

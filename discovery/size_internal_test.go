package discovery

import (
	"errors"
	"log/slog"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"

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

// TestNoFailureKeptWhenNoneFailed: a refresh in which every group-version
// was read leaves the failure log holding nothing (it held an empty map,
// 48 bytes of every client), and one in which some failed holds those,
// until a refresh without them.
func TestNoFailureKeptWhenNoneFailed(t *testing.T) {
	var l failureLog
	l.logger = slog.New(slog.DiscardHandler)
	l.versionsFailed(&Snapshot{content: &content{}})
	if l.lastFailed != nil {
		t.Errorf("after a refresh without failures the log holds %v", l.lastFailed)
	}
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	l.versionsFailed(&Snapshot{content: &content{err: &PartialError{Errors: []*GroupVersionError{{GroupVersion: gv, Err: errors.New("503")}}}}})
	if len(l.lastFailed) != 1 || l.lastFailed[gv.String()] != "503" {
		t.Errorf("after a refresh with one failure the log holds %v", l.lastFailed)
	}
	l.versionsFailed(&Snapshot{content: &content{}})
	if l.lastFailed != nil {
		t.Errorf("after the failure was read again the log holds %v", l.lastFailed)
	}
}

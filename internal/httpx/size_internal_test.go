package httpx

import (
	"testing"
	"unsafe"
)

// TestClientSize pins a Client at 64 bytes, a size class of its own:
// package shared holds one per identity of a server (issue 45), and at
// 72 bytes each is an 80-byte allocation.
func TestClientSize(t *testing.T) {
	if size := unsafe.Sizeof(Client{}); size > 64 {
		t.Errorf("a Client is %d bytes, want at most 64", size)
	}
}

package weakmap

import (
	"runtime"
	"testing"
	"time"
)

// TestMap: the first Put wins, a value nobody holds goes, and its key can
// be held anew.
func TestMap(t *testing.T) {
	var m Map[string, int]
	a, b := new(int), new(int)
	if got := m.Put("k", a); got != a {
		t.Fatalf("first Put returned another value")
	}
	if got := m.Put("k", b); got != a {
		t.Errorf("a second Put replaced the held value")
	}
	if m.Get("k") != a || m.Len() != 1 || m.Get("other") != nil {
		t.Errorf("Get/Len after Put: %v %d", m.Get("k"), m.Len())
	}
	runtime.KeepAlive(a)
	a = nil
	deadline := time.Now().Add(10 * time.Second)
	for m.Len() != 0 || len(m.m) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a value nobody holds is still held (%d live, %d entries)", m.Len(), len(m.m))
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	c := new(int)
	if m.Put("k", c) != c || m.Get("k") != c {
		t.Errorf("the key could not be held anew")
	}
	runtime.KeepAlive(c)
}

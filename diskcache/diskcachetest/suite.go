// Package diskcachetest is an acceptance suite for diskcache.Store, the
// interface discovery and openapi3 keep their bytes in, in the manner of
// testing/fstest.TestFS: any implementation (a disk cache, an in-memory
// one, a shared store such as Redis) can run it.
package diskcachetest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// Store is what the suite tests.
type Store = diskcache.Store

// Key is a Store's key.
type Key = diskcache.Key

// name is the key of a Name without a Version.
func name(n string) Key { return Key{Name: n} }

// Hooks do for the suite what the interface cannot. Each is optional; the
// checks that need one are skipped without it.
type Hooks struct {
	// Corrupt damages what s holds for k in place: a torn write, a
	// flipped bit, a value of another key.
	Corrupt func(t *testing.T, s Store, k Key)
	// BreakPuts makes every later Put to s fail (a full or read-only disk,
	// a lost connection).
	BreakPuts func(t *testing.T, s Store)
	// MaxBytes is the bound the stores newStore returns were given, and
	// Usage what s holds now, in the same unit.
	MaxBytes int64
	Usage    func(s Store) int64
}

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) Store, hooks Hooks) {
	put := func(t *testing.T, s Store, k Key, value []byte) {
		t.Helper()
		if err := s.Put(k, value); err != nil {
			t.Fatalf("Put(%+v): %v", k, err)
		}
	}
	t.Run("MissingKey", func(t *testing.T) {
		if v, ok := newStore(t).Get(name("nope")); ok || v != nil {
			t.Errorf("Get of a missing key = %q, %v", v, ok)
		}
	})
	t.Run("PutGetOverwriteDelete", func(t *testing.T) {
		s := newStore(t)
		put(t, s, name("k"), []byte("one"))
		expect(t, s, name("k"), "one")
		put(t, s, name("k"), []byte("two, longer than one"))
		expect(t, s, name("k"), "two, longer than one")
		put(t, s, name("k"), []byte("3"))
		expect(t, s, name("k"), "3")
		s.Delete(name("k"))
		if _, ok := s.Get(name("k")); ok {
			t.Errorf("deleted key still there")
		}
		s.Delete(name("k")) // deleting twice is fine
	})
	t.Run("OneVersionPerName", func(t *testing.T) {
		s := newStore(t)
		v1 := Key{Name: "apis/apps/v1", Version: "A1"}
		v2 := Key{Name: "apis/apps/v1", Version: "B2"}
		put(t, s, v1, []byte("first"))
		put(t, s, Key{Name: "apis/batch/v1", Version: "A1"}, []byte("another name"))
		expect(t, s, v1, "first")
		if v, ok := s.Get(v2); ok {
			t.Errorf("a Version never stored was served: %q", v)
		}
		expect(t, s, v1, "first") // a Get of another Version leaves the value
		put(t, s, v2, []byte("second"))
		expect(t, s, v2, "second")
		if v, ok := s.Get(v1); ok {
			t.Errorf("the replaced Version is still served: %q", v)
		}
		if v, ok := s.Get(name("apis/apps/v1")); ok {
			t.Errorf("the Name without a Version served a versioned value: %q", v)
		}
		expect(t, s, Key{Name: "apis/batch/v1", Version: "A1"}, "another name")
		s.Delete(name("apis/apps/v1")) // any Version
		if v, ok := s.Get(v2); ok {
			t.Errorf("Delete of the Name left its Version: %q", v)
		}
		expect(t, s, Key{Name: "apis/batch/v1", Version: "A1"}, "another name")
	})
	t.Run("EmptyAndLargeValues", func(t *testing.T) {
		s := newStore(t)
		put(t, s, name("empty"), []byte{})
		expect(t, s, name("empty"), "")
		size := 4 << 20 // within the store's bound, if it has one
		if hooks.MaxBytes > 0 {
			size = int(min(int64(size), hooks.MaxBytes/4))
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		put(t, s, name("big"), big)
		if v, ok := s.Get(name("big")); !ok || !bytes.Equal(v, big) {
			t.Errorf("%d-byte value: ok=%v len=%d", len(big), ok, len(v))
		}
	})
	t.Run("AwkwardKeysAndValues", func(t *testing.T) {
		s := newStore(t)
		keys := []string{"https://h/openapi/v3/apis/apps/v1?hash=AB\napplication/json", "ключ", strings.Repeat("k", 2000), "a/../../b", ""}
		for i, k := range keys {
			put(t, s, name(k), []byte{byte(i), 0, 255, '\n'})
		}
		for i, k := range keys {
			if v, ok := s.Get(name(k)); !ok || !bytes.Equal(v, []byte{byte(i), 0, 255, '\n'}) {
				t.Errorf("key %q: %v %v", k, v, ok)
			}
		}
	})
	t.Run("ManyKeysStayApart", func(t *testing.T) {
		s := newStore(t)
		for i := range 300 {
			put(t, s, name(fmt.Sprint("key-", i)), []byte(fmt.Sprint("value-", i)))
		}
		for i := range 300 {
			expect(t, s, name(fmt.Sprint("key-", i)), fmt.Sprint("value-", i))
		}
	})
	t.Run("PutValueIsNotAliased", func(t *testing.T) {
		s := newStore(t)
		in := []byte("original")
		put(t, s, name("k"), in)
		in[0] = 'X'
		expect(t, s, name("k"), "original")
	})
	t.Run("ConcurrentWritersNeverTear", func(t *testing.T) {
		s := newStore(t)
		values := [][]byte{bytes.Repeat([]byte("a"), 70000), bytes.Repeat([]byte("b"), 1000), []byte("c")}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					if err := s.Put(name("shared"), values[(w+i)%len(values)]); err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if v, ok := s.Get(name("shared")); ok && !(bytes.Equal(v, values[0]) || bytes.Equal(v, values[1]) || bytes.Equal(v, values[2])) {
						t.Errorf("read a value nobody wrote (%d bytes)", len(v))
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	t.Run("CorruptionIsAMiss", func(t *testing.T) {
		if hooks.Corrupt == nil {
			t.Skip("no Corrupt hook")
		}
		s := newStore(t)
		put(t, s, name("k"), bytes.Repeat([]byte("value "), 1000))
		put(t, s, name("other"), []byte("untouched"))
		hooks.Corrupt(t, s, name("k"))
		if v, ok := s.Get(name("k")); ok {
			t.Errorf("a damaged value was returned (%d bytes)", len(v))
		}
		expect(t, s, name("other"), "untouched")
		put(t, s, name("k"), []byte("again"))
		expect(t, s, name("k"), "again")
	})
	t.Run("PutErrorsAreReturned", func(t *testing.T) {
		if hooks.BreakPuts == nil {
			t.Skip("no BreakPuts hook")
		}
		s := newStore(t)
		put(t, s, name("k"), []byte("before"))
		hooks.BreakPuts(t, s)
		if err := s.Put(name("k"), []byte("after")); err == nil {
			t.Errorf("a Put that could not be kept returned no error")
		}
		if err := s.Put(name("new"), []byte("x")); err == nil {
			t.Errorf("a Put of a new key that could not be kept returned no error")
		}
		if v, ok := s.Get(name("k")); ok && string(v) != "before" {
			t.Errorf("after a failed Put, Get = %q, want the old value or a miss", v)
		}
	})
	t.Run("Bounded", func(t *testing.T) {
		if hooks.MaxBytes <= 0 || hooks.Usage == nil {
			t.Skip("no MaxBytes and Usage")
		}
		s := newStore(t)
		value := bytes.Repeat([]byte("v"), int(max(hooks.MaxBytes/16, 1)))
		var last Key
		for i := range 64 {
			last = name(fmt.Sprint("key-", i))
			put(t, s, last, value)
			if u := hooks.Usage(s); u > hooks.MaxBytes {
				t.Fatalf("after %d puts the store holds %d, over its bound of %d", i+1, u, hooks.MaxBytes)
			}
		}
		if v, ok := s.Get(last); !ok || !bytes.Equal(v, value) {
			t.Errorf("the newest value was dropped to keep the bound")
		}
	})
}

func expect(t *testing.T, s Store, k Key, want string) {
	t.Helper()
	if v, ok := s.Get(k); !ok || string(v) != want {
		t.Errorf("Get(%+v) = %q, %v; want %q", k, v, ok, want)
	}
}

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

// Hooks do for the suite what the interface cannot. Each is optional; the
// checks that need one are skipped without it.
type Hooks struct {
	// Corrupt damages what s holds for key in place: a torn write, a
	// flipped bit, a value of another key.
	Corrupt func(t *testing.T, s Store, key string)
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
	put := func(t *testing.T, s Store, key string, value []byte) {
		t.Helper()
		if err := s.Put(key, value); err != nil {
			t.Fatalf("Put(%q): %v", key, err)
		}
	}
	t.Run("MissingKey", func(t *testing.T) {
		if v, ok := newStore(t).Get("nope"); ok || v != nil {
			t.Errorf("Get of a missing key = %q, %v", v, ok)
		}
	})
	t.Run("PutGetOverwriteDelete", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "k", []byte("one"))
		expect(t, s, "k", "one")
		put(t, s, "k", []byte("two, longer than one"))
		expect(t, s, "k", "two, longer than one")
		put(t, s, "k", []byte("3"))
		expect(t, s, "k", "3")
		s.Delete("k")
		if _, ok := s.Get("k"); ok {
			t.Errorf("deleted key still there")
		}
		s.Delete("k") // deleting twice is fine
	})
	t.Run("EmptyAndLargeValues", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "empty", []byte{})
		expect(t, s, "empty", "")
		size := 4 << 20 // within the store's bound, if it has one
		if hooks.MaxBytes > 0 {
			size = int(min(int64(size), hooks.MaxBytes/4))
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		put(t, s, "big", big)
		if v, ok := s.Get("big"); !ok || !bytes.Equal(v, big) {
			t.Errorf("%d-byte value: ok=%v len=%d", len(big), ok, len(v))
		}
	})
	t.Run("AwkwardKeysAndValues", func(t *testing.T) {
		s := newStore(t)
		keys := []string{"https://h/openapi/v3/apis/apps/v1?hash=AB\napplication/json", "ключ", strings.Repeat("k", 2000), "a/../../b", ""}
		for i, k := range keys {
			put(t, s, k, []byte{byte(i), 0, 255, '\n'})
		}
		for i, k := range keys {
			if v, ok := s.Get(k); !ok || !bytes.Equal(v, []byte{byte(i), 0, 255, '\n'}) {
				t.Errorf("key %q: %v %v", k, v, ok)
			}
		}
	})
	t.Run("ManyKeysStayApart", func(t *testing.T) {
		s := newStore(t)
		for i := range 300 {
			put(t, s, fmt.Sprint("key-", i), []byte(fmt.Sprint("value-", i)))
		}
		for i := range 300 {
			expect(t, s, fmt.Sprint("key-", i), fmt.Sprint("value-", i))
		}
	})
	t.Run("PutValueIsNotAliased", func(t *testing.T) {
		s := newStore(t)
		in := []byte("original")
		put(t, s, "k", in)
		in[0] = 'X'
		expect(t, s, "k", "original")
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
					if err := s.Put("shared", values[(w+i)%len(values)]); err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if v, ok := s.Get("shared"); ok && !(bytes.Equal(v, values[0]) || bytes.Equal(v, values[1]) || bytes.Equal(v, values[2])) {
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
		put(t, s, "k", bytes.Repeat([]byte("value "), 1000))
		put(t, s, "other", []byte("untouched"))
		hooks.Corrupt(t, s, "k")
		if v, ok := s.Get("k"); ok {
			t.Errorf("a damaged value was returned (%d bytes)", len(v))
		}
		expect(t, s, "other", "untouched")
		put(t, s, "k", []byte("again"))
		expect(t, s, "k", "again")
	})
	t.Run("PutErrorsAreReturned", func(t *testing.T) {
		if hooks.BreakPuts == nil {
			t.Skip("no BreakPuts hook")
		}
		s := newStore(t)
		put(t, s, "k", []byte("before"))
		hooks.BreakPuts(t, s)
		if err := s.Put("k", []byte("after")); err == nil {
			t.Errorf("a Put that could not be kept returned no error")
		}
		if err := s.Put("new", []byte("x")); err == nil {
			t.Errorf("a Put of a new key that could not be kept returned no error")
		}
		if v, ok := s.Get("k"); ok && string(v) != "before" {
			t.Errorf("after a failed Put, Get = %q, want the old value or a miss", v)
		}
	})
	t.Run("Bounded", func(t *testing.T) {
		if hooks.MaxBytes <= 0 || hooks.Usage == nil {
			t.Skip("no MaxBytes and Usage")
		}
		s := newStore(t)
		value := bytes.Repeat([]byte("v"), int(max(hooks.MaxBytes/16, 1)))
		var last string
		for i := range 64 {
			last = fmt.Sprint("key-", i)
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

func expect(t *testing.T, s Store, key, want string) {
	t.Helper()
	if v, ok := s.Get(key); !ok || string(v) != want {
		t.Errorf("Get(%q) = %q, %v; want %q", key, v, ok, want)
	}
}

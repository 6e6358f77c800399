// Package diskcachetest is an acceptance suite for byte-value caches with
// httpcache's Get/Set/Delete shape, in the manner of testing/fstest.TestFS:
// any implementation can run it.
package diskcachetest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Store is what the suite tests: github.com/gregjones/httpcache.Cache.
type Store interface {
	Get(key string) ([]byte, bool)
	Set(key string, value []byte)
	Delete(key string)
}

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("MissingKey", func(t *testing.T) {
		if v, ok := newStore(t).Get("nope"); ok || v != nil {
			t.Errorf("Get of a missing key = %q, %v", v, ok)
		}
	})
	t.Run("SetGetOverwriteDelete", func(t *testing.T) {
		s := newStore(t)
		s.Set("k", []byte("one"))
		expect(t, s, "k", "one")
		s.Set("k", []byte("two, longer than one"))
		expect(t, s, "k", "two, longer than one")
		s.Set("k", []byte("3"))
		expect(t, s, "k", "3")
		s.Delete("k")
		if _, ok := s.Get("k"); ok {
			t.Errorf("deleted key still there")
		}
		s.Delete("k") // deleting twice is fine
	})
	t.Run("EmptyAndLargeValues", func(t *testing.T) {
		s := newStore(t)
		s.Set("empty", []byte{})
		expect(t, s, "empty", "")
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
		s.Set("big", big)
		if v, ok := s.Get("big"); !ok || !bytes.Equal(v, big) {
			t.Errorf("4 MiB value: ok=%v len=%d", ok, len(v))
		}
	})
	t.Run("AwkwardKeysAndValues", func(t *testing.T) {
		s := newStore(t)
		keys := []string{"https://h/openapi/v3/apis/apps/v1?hash=AB\napplication/json", "ключ", strings.Repeat("k", 2000), "a/../../b", ""}
		for i, k := range keys {
			s.Set(k, []byte{byte(i), 0, 255, '\n'})
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
			s.Set(fmt.Sprint("key-", i), []byte(fmt.Sprint("value-", i)))
		}
		for i := range 300 {
			expect(t, s, fmt.Sprint("key-", i), fmt.Sprint("value-", i))
		}
	})
	t.Run("ReturnedValueIsNotAliased", func(t *testing.T) {
		s := newStore(t)
		in := []byte("original")
		s.Set("k", in)
		in[0] = 'X'
		v, _ := s.Get("k")
		v[1] = 'Y'
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
					s.Set("shared", values[(w+i)%len(values)])
					if v, ok := s.Get("shared"); ok && !(bytes.Equal(v, values[0]) || bytes.Equal(v, values[1]) || bytes.Equal(v, values[2])) {
						t.Errorf("read a value nobody wrote (%d bytes)", len(v))
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func expect(t *testing.T, s Store, key, want string) {
	t.Helper()
	if v, ok := s.Get(key); !ok || string(v) != want {
		t.Errorf("Get(%q) = %q, %v; want %q", key, v, ok, want)
	}
}

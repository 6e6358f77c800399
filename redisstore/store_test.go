//go:build unix

package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

var prefixes atomic.Int64

// testServer is the API server the tests' stores are for.
const testServer = "https://api.test.invalid:6443"

// newStore returns a store on its own client and prefix, so that stores
// of one test do not see each other's values.
func newStore(t *testing.T, r *redisServer, opts ...Option) *Store {
	t.Helper()
	prefix := fmt.Sprintf("test%d:", prefixes.Add(1))
	s, err := New(r.client(t), testServer, append([]Option{WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rewrite replaces the raw Redis value of key, keeping its TTL.
func rewrite(t *testing.T, admin *redis.Client, s *Store, key diskcache.Key, change func([]byte) []byte) {
	t.Helper()
	rk := s.RedisKey(key)
	raw, err := admin.Get(t.Context(), rk).Bytes()
	if err != nil {
		t.Fatalf("GET %s: %v", rk, err)
	}
	if err := admin.SetArgs(t.Context(), rk, change(raw), redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatalf("SET %s: %v", rk, err)
	}
}

func TestAcceptance(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	diskcachetest.Run(t, func(t *testing.T) diskcachetest.Store { return newStore(t, r) }, diskcachetest.Hooks{
		Corrupt: func(t *testing.T, s diskcachetest.Store, key diskcache.Key) {
			rewrite(t, admin, s.(*Store), key, func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
		},
		// A full Redis that evicts nothing refuses every write.
		BreakPuts: func(t *testing.T, s diskcachetest.Store) {
			r.configSet(t, admin, "maxmemory-policy", "noeviction")
			r.configSet(t, admin, "maxmemory", "1")
		},
	})
}

// TestBoundedByEviction: the bound is the server's maxmemory with an
// evicting policy. volatile-ttl evicts only keys that have a TTL, so this
// also proves that every value carries one; as reads renew the TTL, it
// evicts the values least recently used (at millisecond resolution, unlike
// allkeys-lru's one second).
func TestBoundedByEviction(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	const room = 8 << 20
	r.configSet(t, admin, "maxmemory-policy", "volatile-ttl")
	r.configSet(t, admin, "maxmemory-samples", "10")
	r.configSet(t, admin, "maxmemory", fmt.Sprint(usedMemory(t, admin)+room))
	max := usedMemory(t, admin) + room
	diskcachetest.Run(t, func(t *testing.T) diskcachetest.Store { return newStore(t, r) }, diskcachetest.Hooks{
		MaxBytes: max,
		Usage:    func(diskcachetest.Store) int64 { return usedMemory(t, admin) },
	})
}

func TestCorruptValuesAreMissesAndRemoved(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	s := newStore(t, r)
	key := diskcache.Key{Name: "https://h/apis\napplication/json"}
	value := bytes.Repeat([]byte("value "), 100)
	if err := s.Put(diskcache.Key{Name: "another key"}, []byte("its value")); err != nil {
		t.Fatal(err)
	}
	otherRaw, err := admin.Get(t.Context(), s.RedisKey(diskcache.Key{Name: "another key"})).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func([]byte) []byte
	}{
		{"flipped bit in the value", func(b []byte) []byte { b[len(b)-10] ^= 0x10; return b }},
		{"flipped bit in the key", func(b []byte) []byte { b[headerSize+len(testServer)+3] ^= 1; return b }},
		{"flipped bit in the server", func(b []byte) []byte { b[headerSize+3] ^= 1; return b }},
		{"flipped bit in the checksum", func(b []byte) []byte { b[sumAt] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 'x') }},
		{"header only", func(b []byte) []byte { return b[:headerSize] }},
		{"empty", func([]byte) []byte { return []byte{} }},
		{"another program's data", func([]byte) []byte { return []byte("hello from another program") }},
		{"another version of the format", func(b []byte) []byte { b[7] = 1; return b }},
		{"value length past the end", func(b []byte) []byte { b[lengthsAt+12+7] = 0x7f; return b }},
		{"key length past the end", func(b []byte) []byte { b[lengthsAt+4+3] = 0x7f; return b }},
		{"server length past the end", func(b []byte) []byte { b[lengthsAt+3] = 0x7f; return b }},
		{"another key's value copied in", func([]byte) []byte { return bytes.Clone(otherRaw) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Put(key, value); err != nil {
				t.Fatal(err)
			}
			before := s.Stats().Corrupt
			rewrite(t, admin, s, key, tc.change)
			if v, ok := s.Get(key); ok {
				t.Fatalf("a damaged value was returned: %q", v)
			}
			if n, err := admin.Exists(t.Context(), s.RedisKey(key)).Result(); err != nil || n != 0 {
				t.Errorf("the damaged value is still in Redis (%d, %v)", n, err)
			}
			if got := s.Stats().Corrupt; got != before+1 {
				t.Errorf("Stats.Corrupt went from %d to %d, want one more", before, got)
			}
		})
	}
	t.Run("not a string", func(t *testing.T) {
		rk := s.RedisKey(key)
		if err := admin.Del(t.Context(), rk).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.RPush(t.Context(), rk, "a", "list").Err(); err != nil {
			t.Fatal(err)
		}
		if v, ok := s.Get(key); ok {
			t.Fatalf("a list was returned as %q", v)
		}
		if n, _ := admin.Exists(t.Context(), rk).Result(); n != 0 {
			t.Errorf("the list is still there")
		}
		if err := s.Put(key, value); err != nil {
			t.Fatal(err)
		}
		if v, ok := s.Get(key); !ok || !bytes.Equal(v, value) {
			t.Errorf("after a Put, Get = %d bytes, %v", len(v), ok)
		}
	})
	if v, ok := s.Get(diskcache.Key{Name: "another key"}); !ok || string(v) != "its value" {
		t.Errorf("the other key's value = %q, %v", v, ok)
	}
}

// TestDropKeepsANewerValue: a damaged value is removed only if it is still
// what Get read; a good value another process wrote meanwhile stays.
func TestDropKeepsANewerValue(t *testing.T) {
	r := startRedis(t)
	s := newStore(t, r)
	admin := r.client(t)
	rk := s.RedisKey(diskcache.Key{Name: "k"})
	damaged := []byte("damaged")
	if err := admin.Set(t.Context(), rk, damaged, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(diskcache.Key{Name: "k"}, []byte("good")); err != nil { // written after Get read the damaged value
		t.Fatal(err)
	}
	s.drop(t.Context(), rk, int64(len(damaged)), damaged, errCorrupt)
	if v, ok := s.Get(diskcache.Key{Name: "k"}); !ok || string(v) != "good" {
		t.Errorf("Get = %q, %v; the good value was dropped", v, ok)
	}
	s.drop(t.Context(), rk, -1, nil, errCorrupt) // "not a string" does not remove a string
	if _, ok := s.Get(diskcache.Key{Name: "k"}); !ok {
		t.Errorf("the good value was dropped as not a string")
	}
}

// TestAnotherVersion: a Name (an OpenAPI document, as openapi3 names it) in
// another Version (its ?hash=) is a plain miss that leaves the value; the
// new Version's Put replaces it, so Redis holds one value per document.
func TestAnotherVersion(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	s := newStore(t, r)
	keyA := diskcache.Key{Name: "/openapi/v3/apis/apps/v1\napplication/json", Version: "AAAA"}
	keyB := diskcache.Key{Name: "/openapi/v3/apis/apps/v1\napplication/json", Version: "BBBB"}
	if err := s.Put(keyA, []byte("document A")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(keyB); ok {
		t.Fatal("the document at hash A was returned for hash B")
	}
	if v, ok := s.Get(keyA); !ok || string(v) != "document A" {
		t.Fatalf("after a miss at another hash, Get(A) = %q, %v", v, ok)
	}
	if c := s.Stats().Corrupt; c != 0 {
		t.Errorf("another hash was counted as corrupt (%d)", c)
	}
	if err := s.Put(keyB, []byte("document B")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(keyA); ok {
		t.Error("hash A is still served after hash B was stored")
	}
	keys, err := admin.Keys(t.Context(), s.space+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("Redis holds %v (%v), want one value for the document", keys, err)
	}
	// Another Accept is another value.
	if err := s.Put(diskcache.Key{Name: "/openapi/v3/apis/apps/v1\napplication/com.github.proto-openapi.spec.v3@v1.0+protobuf", Version: "BBBB"}, []byte("pb")); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get(keyB); !ok || string(v) != "document B" {
		t.Errorf("Get(B) = %q, %v after the protobuf was stored", v, ok)
	}
}

func TestTTL(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	for _, tc := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"default", nil, DefaultTTL},
		{"WithTTL", []Option{WithTTL(90 * time.Second)}, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, r, tc.opts...)
			if err := s.Put(diskcache.Key{Name: "k"}, []byte("v")); err != nil {
				t.Fatal(err)
			}
			rk := s.RedisKey(diskcache.Key{Name: "k"})
			ttl := admin.PTTL(t.Context(), rk).Val()
			if ttl <= tc.want-time.Minute/2 || ttl > tc.want {
				t.Errorf("after Put, the TTL is %v, want %v", ttl, tc.want)
			}
			// A read renews it.
			if err := admin.PExpire(t.Context(), rk, time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Get(diskcache.Key{Name: "k"}); !ok {
				t.Fatal("miss")
			}
			if ttl := admin.PTTL(t.Context(), rk).Val(); ttl <= tc.want-time.Minute/2 {
				t.Errorf("after Get, the TTL is %v, want it renewed to %v", ttl, tc.want)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		s := newStore(t, r, WithTTL(time.Millisecond))
		if err := s.Put(diskcache.Key{Name: "k"}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for admin.Exists(t.Context(), s.RedisKey(diskcache.Key{Name: "k"})).Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("a value with a 1ms TTL is still there after 5s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, ok := s.Get(diskcache.Key{Name: "k"}); ok {
			t.Error("an expired value was returned")
		}
	})
}

func TestMaxValueBytes(t *testing.T) {
	r := startRedis(t)
	s := newStore(t, r, WithMaxValueBytes(1000))
	if err := s.Put(diskcache.Key{Name: "k"}, make([]byte, 1000)); err != nil {
		t.Fatalf("a value at the limit: %v", err)
	}
	err := s.Put(diskcache.Key{Name: "k"}, make([]byte, 1001))
	var pe *PutError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &pe) || pe.Key != (diskcache.Key{Name: "k"}) {
		t.Fatalf("Put over the limit = %v, want a *PutError for k with ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "1001 bytes, the limit is 1000") {
		t.Errorf("the error does not say the sizes: %v", err)
	}
	if _, ok := s.Get(diskcache.Key{Name: "k"}); ok {
		t.Error("the older value is still served after a newer one was refused")
	}
}

func TestOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"empty prefix", WithPrefix(""), "prefix must not be empty"},
		{"zero TTL", WithTTL(0), "TTL must be at least 1ms"},
		{"sub-millisecond TTL", WithTTL(time.Microsecond), "TTL must be at least 1ms"},
		{"zero max", WithMaxValueBytes(0), "max value bytes must be between"},
		{"max past Redis's limit", WithMaxValueBytes(512 << 20), "max value bytes must be between"},
		{"zero timeout", WithTimeout(0), "timeout must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(c, testServer, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := New(nil, testServer); err == nil {
		t.Error("New(nil) returned no error")
	}
	if _, err := New(c, ""); err == nil || !strings.Contains(err.Error(), "must be named") {
		t.Errorf("New without a server = %v, want an error saying it must be named", err)
	}
	s, err := New(c, testServer, WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.prefix != DefaultPrefix || s.opts.ttl != DefaultTTL || s.opts.maxValueBytes != DefaultMaxValueBytes || s.opts.timeout != DefaultTimeout || s.opts.logger == nil {
		t.Errorf("defaults: %+v", s.opts)
	}
	if rk := s.RedisKey(diskcache.Key{Name: "x"}); !strings.HasPrefix(rk, DefaultPrefix) || len(rk) != len(DefaultPrefix)+16+1+32 {
		t.Errorf("RedisKey = %q", rk)
	}
}

// logRecorder keeps the messages logged at warn and info.
type logRecorder struct {
	mu   chan struct{}
	msgs []string
}

func newLogRecorder() *logRecorder { return &logRecorder{mu: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	l.mu <- struct{}{}
	l.msgs = append(l.msgs, rec.Level.String()+" "+rec.Message)
	<-l.mu
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) messages() []string {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return append([]string(nil), l.msgs...)
}

// TestRedisDown: without Redis, Get is a miss and Delete a no-op, Put
// returns the error; each kind of trouble is logged once when it starts
// and once when it ends.
func TestRedisDown(t *testing.T) {
	r := startRedis(t)
	logs := newLogRecorder()
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(c, testServer, WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(diskcache.Key{Name: "k"}, []byte("v")); err != nil {
		t.Fatal(err)
	}
	r.stop()
	for range 5 {
		if v, ok := s.Get(diskcache.Key{Name: "k"}); ok {
			t.Fatalf("Get without Redis = %q", v)
		}
		var pe *PutError
		if err := s.Put(diskcache.Key{Name: "k"}, []byte("w")); !errors.As(err, &pe) {
			t.Fatalf("Put without Redis = %v, want a *PutError", err)
		}
		s.Delete(diskcache.Key{Name: "k"})
	}
	if st := s.Stats(); st.Errors != 15 || st.Misses != 5 {
		t.Errorf("Stats = %+v, want 15 errors and 5 misses", st)
	}
	want := []string{
		"WARN redisstore: cannot read from Redis; going on without it until it answers",
		"WARN redisstore: cannot write to Redis; going on without it until it answers",
		"WARN redisstore: cannot delete from Redis; going on without it until it answers",
	}
	if got := logs.messages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r.restart(t)
	// go-redis's pool waits a while after failed dials before it dials
	// again.
	deadline := time.Now().Add(10 * time.Second)
	for s.Put(diskcache.Key{Name: "k"}, []byte("x")) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Put still fails 10s after Redis restarted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Delete(diskcache.Key{Name: "k"})
	for range 2 {
		if _, ok := s.Get(diskcache.Key{Name: "k"}); ok { // an empty server now
			t.Error("a value survived a restart without persistence")
		}
		if err := s.Put(diskcache.Key{Name: "k"}, []byte("x")); err != nil {
			t.Errorf("Put after the restart: %v", err)
		}
		s.Delete(diskcache.Key{Name: "k"})
	}
	want = append(want, "INFO redisstore: Redis answers again", "INFO redisstore: Redis answers again", "INFO redisstore: Redis answers again")
	if got := logs.messages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTimeout: a Redis that has stopped answering (SIGSTOP) costs a call
// no more than the timeout, with a client that honours contexts.
func TestTimeout(t *testing.T) {
	r := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(c, testServer, WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(diskcache.Key{Name: "k"}, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }()
	start := time.Now()
	_, ok := s.Get(diskcache.Key{Name: "k"})
	perr := s.Put(diskcache.Key{Name: "k"}, []byte("w"))
	s.Delete(diskcache.Key{Name: "k"})
	took := time.Since(start)
	if ok || perr == nil {
		t.Errorf("with Redis stopped: Get ok=%v, Put err=%v", ok, perr)
	}
	if took > 3*time.Second/2 {
		t.Errorf("three calls took %v with a 200ms timeout", took)
	}
	t.Logf("three calls against a stopped Redis: %v", took)
}

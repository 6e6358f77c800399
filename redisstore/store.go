package redisstore

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// Defaults of the options.
const (
	DefaultPrefix = "kubeatlas:"
	// DefaultTTL is how long a value stays after it was last written or
	// read: documents a fleet keeps using stay, the rest go.
	DefaultTTL = 24 * time.Hour
	// DefaultMaxValueBytes is the largest value Put stores (64 MiB, well
	// under Redis's 512 MB string limit); the real apps/v1 OpenAPI
	// document is 0.7 MB.
	DefaultMaxValueBytes = 64 << 20
	// DefaultTimeout bounds each Get, Put and Delete (see WithTimeout).
	DefaultTimeout = 2 * time.Second
)

// maxRedisValue is Redis's largest string (proto-max-bulk-len's default).
const maxRedisValue = 512 << 20

type options struct {
	prefix        string
	ttl           time.Duration
	maxValueBytes int64
	timeout       time.Duration
	logger        *slog.Logger
}

// Option configures a Store.
type Option func(*options) error

// WithPrefix is what every Redis key of the store begins with, so that
// kubeatlas's keys stay apart from the rest of a shared Redis, and
// clusters or tenants that must not share entries apart from each other.
// Default: DefaultPrefix ("kubeatlas:").
func WithPrefix(p string) Option {
	return func(o *options) error {
		if p == "" {
			return errors.New("redisstore: the key prefix must not be empty")
		}
		o.prefix = p
		return nil
	}
}

// WithTTL sets how long a value stays in Redis after it was last written
// or read (Get renews it). Redis's granularity is a millisecond. Default:
// DefaultTTL (24 h).
func WithTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond {
			return fmt.Errorf("redisstore: the TTL must be at least 1ms, got %v", d)
		}
		o.ttl = d
		return nil
	}
}

// WithMaxValueBytes bounds the values Put stores; a larger one is refused
// with ErrTooLarge. Default: DefaultMaxValueBytes (64 MiB).
func WithMaxValueBytes(n int64) Option {
	return func(o *options) error {
		if n < 1 || n > maxRedisValue-1<<20 {
			return fmt.Errorf("redisstore: max value bytes must be between 1 and %d (Redis's string limit, less room for the header), got %d", maxRedisValue-1<<20, n)
		}
		o.maxValueBytes = n
		return nil
	}
}

// WithTimeout bounds each operation, as Store's methods take no context.
// The client honours it if it was made with ContextTimeoutEnabled: true;
// otherwise go-redis ignores context deadlines on the socket, and its own
// DialTimeout, ReadTimeout and WriteTimeout (5 s, 3 s, 3 s unless set) bound
// a call instead. Default: DefaultTimeout (2 s).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: the timeout must be positive, got %v", d)
		}
		o.timeout = d
		return nil
	}
}

// WithLogger receives what Get and Delete, which return no error, could
// not do, and values dropped as corrupt. Trouble talking to Redis is logged
// when it starts and when it ends, not on every call. Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// ErrTooLarge is the cause of Put's error for a value over the limit
// (WithMaxValueBytes).
var ErrTooLarge = errors.New("value over the size limit")

// Store keeps values in Redis, for replicas and processes that share them
// (see the package documentation). Make one with New.
type Store struct {
	client redis.UniversalClient
	opts   options

	// failing holds, for reads, writes and deletes, whether the last one
	// failed, so that an outage is logged when it starts and ends.
	failing [3]atomic.Bool

	hits, misses, corrupt, errs atomic.Int64
}

var _ diskcache.Store = (*Store)(nil)

// New returns a store over client, which the caller keeps and closes.
// Any redis.UniversalClient does: a single server, Sentinel, or a cluster
// (every key the store uses is a single key).
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	o := options{prefix: DefaultPrefix, ttl: DefaultTTL, maxValueBytes: DefaultMaxValueBytes, timeout: DefaultTimeout, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Store{client: client, opts: o}, nil
}

// Stats counts what a Store did.
type Stats struct {
	Hits, Misses int64
	// Corrupt counts values that failed verification and were dropped.
	Corrupt int64
	// Errors counts operations Redis did not answer or refused.
	Errors int64
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), Corrupt: s.corrupt.Load(), Errors: s.errs.Load()}
}

// RedisKey is the Redis key that holds what k's Name holds: the prefix,
// then a hash of the Name, so that any Name (long, binary, with the
// prefix's separators) is fine. One value per Name: a new Version replaces
// the old one, so that Redis holds one value per live OpenAPI document
// (openapi3 names a document by its path and Accept, with its ?hash= as the
// Version).
func (s *Store) RedisKey(k diskcache.Key) string {
	sum := sha256.Sum256([]byte(k.Name))
	return s.opts.prefix + hex.EncodeToString(sum[:16])
}

// The value's format: magic (its last byte the version), SHA-256 of what
// follows it, the lengths of name, version and value, then name, version,
// value. The key is stored so that a value of another Name (copied, or a
// hash collision) is told apart, and a value of another Version is a plain
// miss; the lengths, so that a truncated value is; the magic, so that
// another program's data is. SHA-256 rather than diskcache's CRC-32C: its
// cost (about 1.5 ms a megabyte without SHA extensions) is small next to
// the network round trip, and many writers of many versions share one
// store.
var magic = [8]byte{'k', 'a', 't', 'l', 'a', 's', 'r', 2}

const (
	sumAt      = 8 // len(magic)
	lengthsAt  = sumAt + sha256.Size
	headerSize = lengthsAt + 4 + 4 + 8
)

func encode(k diskcache.Key, value []byte) []byte {
	buf := make([]byte, headerSize, headerSize+len(k.Name)+len(k.Version)+len(value))
	copy(buf, magic[:])
	binary.LittleEndian.PutUint32(buf[lengthsAt:], uint32(len(k.Name)))
	binary.LittleEndian.PutUint32(buf[lengthsAt+4:], uint32(len(k.Version)))
	binary.LittleEndian.PutUint64(buf[lengthsAt+8:], uint64(len(value)))
	buf = append(append(append(buf, k.Name...), k.Version...), value...)
	sum := sha256.Sum256(buf[lengthsAt:])
	copy(buf[sumAt:], sum[:])
	return buf
}

var errCorrupt = errors.New("not a verified value of this store")

// decode verifies a value and returns its key and value.
func decode(buf []byte) (k diskcache.Key, value []byte, err error) {
	if len(buf) < headerSize || [8]byte(buf[:8]) != magic {
		return k, nil, fmt.Errorf("%w: no header of this format", errCorrupt)
	}
	nl := uint64(binary.LittleEndian.Uint32(buf[lengthsAt:]))
	vl := uint64(binary.LittleEndian.Uint32(buf[lengthsAt+4:]))
	dl := binary.LittleEndian.Uint64(buf[lengthsAt+8:])
	if n := uint64(len(buf)); dl > n || nl+vl+dl != n-headerSize {
		return k, nil, fmt.Errorf("%w: the header declares %d bytes, there are %d", errCorrupt, headerSize+nl+vl+dl, n)
	}
	if sum := sha256.Sum256(buf[lengthsAt:]); [sha256.Size]byte(buf[sumAt:lengthsAt]) != sum {
		return k, nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	k = diskcache.Key{Name: string(buf[headerSize : headerSize+nl]), Version: string(buf[headerSize+nl : headerSize+nl+vl])}
	return k, buf[headerSize+nl+vl:], nil
}

func (s *Store) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.timeout)
}

// Get returns the value stored for key, and renews its TTL. A value that
// fails verification (damaged, truncated, another Name's, another
// program's) is a miss, and is removed; so is a Redis error, which is
// logged. A value of another Version is a plain miss: the next Put
// replaces it.
func (s *Store) Get(key diskcache.Key) ([]byte, bool) {
	ctx, cancel := s.context()
	defer cancel()
	rk := s.RedisKey(key)
	buf, err := s.client.GetEx(ctx, rk, s.opts.ttl).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		s.answered(opRead)
		s.misses.Add(1)
		return nil, false
	case isWrongType(err):
		// Not a string at all: another program's data.
		s.answered(opRead)
		s.drop(ctx, rk, nil, err)
		return nil, false
	case err != nil:
		s.failed(opRead, err)
		s.misses.Add(1)
		return nil, false
	}
	s.answered(opRead)
	k, value, err := decode(buf)
	switch {
	case err != nil:
	case k.Name != key.Name:
		err = fmt.Errorf("%w: it holds another key", errCorrupt)
	case k.Version != key.Version:
		s.misses.Add(1)
		return nil, false
	}
	if err != nil {
		s.drop(ctx, rk, buf, err)
		return nil, false
	}
	s.hits.Add(1)
	return value, true
}

// dropIfUnchanged deletes a key if it still holds what was read (the SHA-1
// of the string ARGV[1], or a value that is not a string when ARGV[1] is
// empty), so that a good value another process wrote meanwhile stays.
var dropIfUnchanged = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return 0 end
if t ~= 'string' then
  if ARGV[1] == '' then return redis.call('DEL', KEYS[1]) end
  return 0
end
if ARGV[1] ~= '' and redis.sha1hex(redis.call('GET', KEYS[1])) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// drop removes a value that failed verification: buf is what was read, nil
// for a key that is not a string.
func (s *Store) drop(ctx context.Context, rk string, buf []byte, why error) {
	s.misses.Add(1)
	s.corrupt.Add(1)
	s.opts.logger.Warn("redisstore: dropping a value that fails verification", "key", rk, "err", why)
	var digest string
	if buf != nil {
		digest = sha1hex(buf)
	}
	if err := dropIfUnchanged.Run(ctx, s.client, []string{rk}, digest).Err(); err != nil {
		s.failed(opDelete, err)
		return
	}
	s.answered(opDelete)
}

// sha1hex is Lua's redis.sha1hex of b: the script compares what it finds
// with what was read without the value being sent back.
func sha1hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// Put stores value for key, with the TTL, replacing what its Name held in
// any Version. A value over the size limit is refused with ErrTooLarge, and
// key's older value, if any, is removed, so that it is not served in place
// of the one refused.
func (s *Store) Put(key diskcache.Key, value []byte) error {
	ctx, cancel := s.context()
	defer cancel()
	rk := s.RedisKey(key)
	if int64(len(value)) > s.opts.maxValueBytes {
		err := &PutError{Key: key, Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(value), s.opts.maxValueBytes)}
		if derr := s.client.Del(ctx, rk).Err(); derr != nil {
			s.failed(opDelete, derr)
		} else {
			s.answered(opDelete)
		}
		return err
	}
	if err := s.client.Set(ctx, rk, encode(key, value), s.opts.ttl).Err(); err != nil {
		s.failed(opWrite, err)
		return &PutError{Key: key, Err: err}
	}
	s.answered(opWrite)
	return nil
}

// PutError is Put's error: the key, and why Redis did not store its value.
type PutError struct {
	Key diskcache.Key
	Err error
}

func (e *PutError) Error() string {
	return fmt.Sprintf("redisstore: storing %.80q: %v", e.Key.Name, e.Err)
}

func (e *PutError) Unwrap() error { return e.Err }

// Delete removes what key's Name holds, in any Version; a Redis error is
// logged.
func (s *Store) Delete(key diskcache.Key) {
	ctx, cancel := s.context()
	defer cancel()
	if err := s.client.Del(ctx, s.RedisKey(key)).Err(); err != nil {
		s.failed(opDelete, err)
		return
	}
	s.answered(opDelete)
}

type op int

const (
	opRead op = iota
	opWrite
	opDelete
)

var opNames = [...]string{opRead: "read from", opWrite: "write to", opDelete: "delete from"}

// failed counts an operation Redis did not do, and logs it if the one
// before it went through.
func (s *Store) failed(o op, err error) {
	s.errs.Add(1)
	if s.failing[o].CompareAndSwap(false, true) {
		s.opts.logger.Warn("redisstore: cannot "+opNames[o]+" Redis; going on without it until it answers", "err", err)
	}
}

// answered logs the end of an outage.
func (s *Store) answered(o op) {
	if s.failing[o].Load() && s.failing[o].CompareAndSwap(true, false) {
		s.opts.logger.Info("redisstore: Redis answers again", "op", opNames[o])
	}
}

package redisstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// Defaults of the options.
const (
	// DefaultPrefix begins every key; the server's identity follows it
	// (see New).
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
	verify        func(diskcache.Key, []byte) error
}

// Option configures a Store.
type Option func(*options) error

// WithPrefix is what every Redis key of the store begins with, so that
// kubeatlas's keys stay apart from the rest of a shared Redis, and tenants
// or programs that must not share entries apart from each other. The
// server's identity follows the prefix in every key whatever it is (see
// New): a prefix cannot make two servers share entries. Default:
// DefaultPrefix ("kubeatlas:").
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

// WithVerify sets a check every value must pass when it is read, after the
// store's own (checksum, key, server), before Get returns it: whoever can
// write to the Redis can write a value that passes the store's checks, so
// what can be checked against its key is checked again on every read. A
// value that fails is a miss, and is removed. Default: VerifyContent.
func WithVerify(verify func(k diskcache.Key, value []byte) error) Option {
	return func(o *options) error {
		if verify == nil {
			return errors.New("redisstore: nil verify function")
		}
		o.verify = verify
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
	// server is the identity of the API server the store is for, and
	// space its hash in every Redis key.
	server, space string

	// failing holds, for reads, writes and deletes, whether the last one
	// failed, so that an outage is logged when it starts and ends.
	failing [3]atomic.Bool

	hits, misses, corrupt, errs atomic.Int64
}

var _ diskcache.Store = (*Store)(nil)

// New returns a store over client, which the caller keeps and closes, for
// the API server at server: its URL as the clients that use the store are
// given it (rest.Config.Host; a trailing slash aside). Every Redis key
// holds a hash of it after the prefix, and every value holds it, so that
// the stores of two servers never share an entry, whatever their prefixes:
// discovery's persisted snapshot, for one, is filed under a name that does
// not name the server. Replicas share entries when they name their server
// alike. Any redis.UniversalClient does: a single server, Sentinel, or a
// cluster (every key the store uses is a single key).
func New(client redis.UniversalClient, server string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if server = strings.TrimRight(server, "/"); server == "" {
		return nil, errors.New("redisstore: the API server must be named (its URL), so that two servers' entries stay apart")
	}
	o := options{prefix: DefaultPrefix, ttl: DefaultTTL, maxValueBytes: DefaultMaxValueBytes, timeout: DefaultTimeout,
		logger: slog.New(slog.DiscardHandler), verify: VerifyContent}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256([]byte(server))
	return &Store{client: client, opts: o, server: server, space: o.prefix + hex.EncodeToString(sum[:8]) + ":"}, nil
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

// RedisKey is the Redis key that holds what k's Name holds: the prefix, a
// hash of the server (see New) and ":", then a hash of the Name, so that
// any Name (long, binary, with the prefix's separators) is fine. One value per Name: a new Version replaces
// the old one, so that Redis holds one value per live OpenAPI document
// (openapi3 names a document by its path and Accept, with its ?hash= as the
// Version).
func (s *Store) RedisKey(k diskcache.Key) string {
	sum := sha256.Sum256([]byte(k.Name))
	return s.space + hex.EncodeToString(sum[:16])
}

// The value's format: magic (its last byte the version), SHA-256 of what
// follows it, the lengths of server, name, version and value, then server,
// name, version, value. The key is stored so that a value of another Name
// (copied, or a hash collision) is told apart, and a value of another
// Version is a plain miss; the server, so that a value of another server's
// key space is; the lengths, so that a truncated value is; the magic, so
// that another program's data is. SHA-256 rather than diskcache's CRC-32C: its
// cost (about 1.5 ms a megabyte without SHA extensions) is small next to
// the network round trip, and many writers of many versions share one
// store.
var magic = [8]byte{'k', 'a', 't', 'l', 'a', 's', 'r', 3}

const (
	sumAt      = 8 // len(magic)
	lengthsAt  = sumAt + sha256.Size
	headerSize = lengthsAt + 4 + 4 + 4 + 8
)

func encode(server string, k diskcache.Key, value []byte) []byte {
	buf := make([]byte, headerSize, encodedSize(server, k, len(value)))
	copy(buf, magic[:])
	binary.LittleEndian.PutUint32(buf[lengthsAt:], uint32(len(server)))
	binary.LittleEndian.PutUint32(buf[lengthsAt+4:], uint32(len(k.Name)))
	binary.LittleEndian.PutUint32(buf[lengthsAt+8:], uint32(len(k.Version)))
	binary.LittleEndian.PutUint64(buf[lengthsAt+12:], uint64(len(value)))
	buf = append(append(append(append(buf, server...), k.Name...), k.Version...), value...)
	sum := sha256.Sum256(buf[lengthsAt:])
	copy(buf[sumAt:], sum[:])
	return buf
}

func encodedSize(server string, k diskcache.Key, n int) int {
	return headerSize + len(server) + len(k.Name) + len(k.Version) + n
}

var errCorrupt = errors.New("not a verified value of this store")

// decode verifies a value and returns its server, key and value.
func decode(buf []byte) (server string, k diskcache.Key, value []byte, err error) {
	if len(buf) < headerSize || [8]byte(buf[:8]) != magic {
		return "", k, nil, fmt.Errorf("%w: no header of this format", errCorrupt)
	}
	sl := uint64(binary.LittleEndian.Uint32(buf[lengthsAt:]))
	nl := uint64(binary.LittleEndian.Uint32(buf[lengthsAt+4:]))
	vl := uint64(binary.LittleEndian.Uint32(buf[lengthsAt+8:]))
	dl := binary.LittleEndian.Uint64(buf[lengthsAt+12:])
	if n := uint64(len(buf)); dl > n || sl+nl+vl+dl != n-headerSize {
		return "", k, nil, fmt.Errorf("%w: the header declares %d bytes, there are %d", errCorrupt, headerSize+sl+nl+vl+dl, n)
	}
	if sum := sha256.Sum256(buf[lengthsAt:]); [sha256.Size]byte(buf[sumAt:lengthsAt]) != sum {
		return "", k, nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	at := uint64(headerSize)
	server = string(buf[at : at+sl])
	at += sl
	k = diskcache.Key{Name: string(buf[at : at+nl]), Version: string(buf[at+nl : at+nl+vl])}
	return server, k, buf[at+nl+vl:], nil
}

func (s *Store) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.timeout)
}

// firstRead is how much of a value Get reads in its first round trip,
// together with the value's length: most documents whole (the real
// apps/v1 OpenAPI document is 0.7 MB); a longer value within the limit
// takes a second trip, and a value over it is never read past this.
const firstRead = 1 << 20

// Get returns the value stored for key, and renews its TTL. A value that
// fails verification (damaged, truncated, another Name's or server's,
// another program's, longer than any value Put stores for key, refused
// by WithVerify's check) is a miss, and is removed; so is a Redis error,
// which is logged. A value of another Version is a plain miss: the next
// Put replaces it. Get reads no more of a value than Put may have stored
// for key: a larger one costs one bounded read (firstRead) before it is
// dropped.
func (s *Store) Get(key diskcache.Key) ([]byte, bool) {
	ctx, cancel := s.context()
	defer cancel()
	rk := s.RedisKey(key)
	limit := int64(encodedSize(s.server, key, 0)) + s.opts.maxValueBytes
	// One transaction, so that the length, the bytes and the renewal are
	// of one value: GETRANGE bounds what is read whatever the value's
	// size (GETEX, before, read a 400 MB foreign value whole).
	var size *redis.IntCmd
	var head *redis.StringCmd
	var renewed *redis.BoolCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		size = p.StrLen(ctx, rk)
		head = p.GetRange(ctx, rk, 0, min(limit, firstRead)-1)
		renewed = p.PExpire(ctx, rk, s.opts.ttl)
		return nil
	})
	switch {
	case isWrongType(size.Err()):
		// Not a string at all: another program's data.
		s.answered(opRead)
		s.drop(ctx, rk, -1, nil, size.Err())
		return nil, false
	case err != nil:
		s.failed(opRead, err)
		s.misses.Add(1)
		return nil, false
	}
	s.answered(opRead)
	n := size.Val()
	buf := []byte(head.Val())
	switch {
	case n == 0 && !renewed.Val():
		// No such key (an empty string, which Put never writes, is a
		// header too short below).
		s.misses.Add(1)
		return nil, false
	case n > limit:
		s.drop(ctx, rk, n, buf, fmt.Errorf("%w: %d bytes, more than a value of this key may have (%d)", errCorrupt, n, limit))
		return nil, false
	case int64(len(buf)) < n:
		var ok bool
		if buf, ok = s.readRest(ctx, rk, buf, n); !ok {
			return nil, false
		}
	}
	server, k, value, err := decode(buf)
	switch {
	case err != nil:
	case server != s.server:
		err = fmt.Errorf("%w: it is another server's (%.80q)", errCorrupt, server)
	case k.Name != key.Name:
		err = fmt.Errorf("%w: it holds another key", errCorrupt)
	case k.Version != key.Version:
		s.misses.Add(1)
		return nil, false
	default:
		err = s.opts.verify(key, value)
	}
	if err != nil {
		s.drop(ctx, rk, n, buf, err)
		return nil, false
	}
	s.hits.Add(1)
	return value, true
}

// readRest reads the rest of a value of n bytes whose first bytes are
// head. A value replaced since (another checksum at its head) is a plain
// miss.
func (s *Store) readRest(ctx context.Context, rk string, head []byte, n int64) ([]byte, bool) {
	var again, rest *redis.StringCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		again = p.GetRange(ctx, rk, 0, lengthsAt-1)
		rest = p.GetRange(ctx, rk, int64(len(head)), n-1)
		return nil
	})
	if err != nil {
		s.failed(opRead, err)
		s.misses.Add(1)
		return nil, false
	}
	if again.Val() != string(head[:min(len(head), lengthsAt)]) || int64(len(head)+len(rest.Val())) != n {
		s.misses.Add(1)
		return nil, false
	}
	buf := make([]byte, 0, n)
	return append(append(buf, head...), rest.Val()...), true
}

// VerifyContent is the default check of WithVerify: a value under a
// Content key whose Version is a SHA-512 in hexadecimal (how kube-openapi
// names an OpenAPI document at its ?hash= URL, and how openapi3 marks the
// JSON documents it verified before storing them) must have that SHA-512:
// the body of a value that is an HTTP response (as diskcache.NewTransport
// stores them), or else the value itself. Any other value passes: its key
// says nothing to check it against.
func VerifyContent(k diskcache.Key, value []byte) error {
	if !k.Content || len(k.Version) != 2*sha512.Size {
		return nil
	}
	var want [sha512.Size]byte
	if _, err := hex.Decode(want[:], []byte(k.Version)); err != nil {
		return nil
	}
	content := value
	if bytes.HasPrefix(value, []byte("HTTP/")) {
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(value)), nil)
		if err != nil {
			return fmt.Errorf("%w: a stored response that does not parse: %v", errCorrupt, err)
		}
		resp.Body.Close()
		n := resp.ContentLength
		if n < 0 || n > int64(len(value)) || resp.Header.Get("Content-Encoding") != "" {
			return fmt.Errorf("%w: a stored response without its body's length", errCorrupt)
		}
		content = value[int64(len(value))-n:]
	}
	if sha512.Sum512(content) != want {
		return fmt.Errorf("%w: its content's SHA-512 is not the %.16s... its key names", errCorrupt, k.Version)
	}
	return nil
}

// dropIfUnchanged removes a key if it still holds what was read: a string
// of the length ARGV[1] that begins with ARGV[2], or, when ARGV[1] is
// empty, a value that is not a string, so that a good value another
// process wrote meanwhile stays (ours begin with their SHA-256). Its work
// is bounded whatever the value's size (GETRANGE of what was sent;
// UNLINK frees the memory off Redis's main thread): a script that hashed
// the value blocked every client of the Redis for seconds on a 400 MB one.
var dropIfUnchanged = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return 0 end
if ARGV[1] == '' then
  if t ~= 'string' then return redis.call('UNLINK', KEYS[1]) end
  return 0
end
if t ~= 'string' or redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
if #ARGV[2] == 0 or redis.call('GETRANGE', KEYS[1], 0, #ARGV[2] - 1) == ARGV[2] then
  return redis.call('UNLINK', KEYS[1])
end
return 0
`)

// dropCompare is how much of a value's beginning dropIfUnchanged
// compares: our values' checksum, and enough of another program's data.
const dropCompare = 4096

// drop removes a value that failed verification: n is its length and
// head its first bytes, as read; n is -1 for a key that is not a string.
func (s *Store) drop(ctx context.Context, rk string, n int64, head []byte, why error) {
	s.misses.Add(1)
	s.corrupt.Add(1)
	s.opts.logger.Warn("redisstore: dropping a value that fails verification", "key", rk, "err", why)
	var length string
	if n >= 0 {
		length = fmt.Sprint(n)
	}
	head = head[:min(len(head), dropCompare)]
	if err := dropIfUnchanged.Run(ctx, s.client, []string{rk}, length, head).Err(); err != nil {
		s.failed(opDelete, err)
		return
	}
	s.answered(opDelete)
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
		if derr := s.client.Unlink(ctx, rk).Err(); derr != nil {
			s.failed(opDelete, derr)
		} else {
			s.answered(opDelete)
		}
		return err
	}
	if err := s.client.Set(ctx, rk, encode(s.server, key, value), s.opts.ttl).Err(); err != nil {
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
	if err := s.client.Unlink(ctx, s.RedisKey(key)).Err(); err != nil {
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

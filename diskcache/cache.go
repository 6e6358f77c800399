package diskcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of the options.
const (
	DefaultMaxBytes   = 256 << 20
	DefaultMaxEntries = 10000
)

type options struct {
	maxBytes   int64
	maxEntries int
	logger     *slog.Logger
	clock      clock.PassiveClock
	// logged: the caller gave a logger (WithLogger).
	logged bool
}

// Option configures a Cache.
type Option func(*options) error

// WithMaxBytes bounds the total size of the entries. Default:
// DefaultMaxBytes (256 MiB).
func WithMaxBytes(n int64) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("diskcache: max bytes must be positive, got %d", n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithMaxEntries bounds the number of entries. Default: DefaultMaxEntries.
func WithMaxEntries(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("diskcache: max entries must be positive, got %d", n)
		}
		o.maxEntries = n
		return nil
	}
}

// WithLogger receives what a method without an error result could not do
// (httpcache's Set and Delete). Default: nowhere; Stats counts them too,
// except the refusal of an unsafe directory (see Open), which goes to
// slog.Default() when no logger is given.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger, o.logged = l, true; return nil }
}

// WithClock sets the clock for recency. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) error { o.clock = c; return nil }
}

// Store is what kubeatlas's clients keep their bytes in (discovery's warm
// start, the HTTP cache under openapi3): one value per Key's Name, in one
// Version. Get reports a miss for anything it cannot vouch for (torn,
// corrupt, foreign) and for a value of another Version, and its value is
// not modified by the caller; Put stores the whole value, replacing
// whatever its Name held in any Version, or returns why it could not;
// Delete removes what a Name holds, in any Version, present or not. A Store
// is safe for concurrent use. *Cache is one; diskcachetest.Run checks any
// other. What a Store other than a *Cache answers may have been written by
// anyone who can write what is behind it (Redis, a fleet's shared
// directory): discovery and openapi3 use it only as far as the API server
// confirms it, where a *Cache (a directory only the user or root can
// write) is trusted as the user is.
type Store interface {
	Get(k Key) ([]byte, bool)
	Put(k Key, value []byte) error
	Delete(k Key)
}

// Key names a value in a Store. Name is where the value is filed: a Store
// holds one value per Name, so a new Version replaces the old one wherever
// it is stored, with nothing left to compact away. Version tells the values
// a Name held over time apart: a Get of another Version is a miss.
//
// A store knows nothing else of keys; their meaning is the caller's
// policy. NewTransport names a response by its URL and Accept (URLKey)
// unless WithKey says otherwise: openapi3 files a document by its path and
// Accept, with its ?hash= as the Version, so that each group-version keeps
// one document on disk (or in Redis), the live one.
type Key struct {
	Name, Version string
	// Content says that a value under this key is the content Version
	// names, verified against it before it was stored, and the same
	// whichever server served it: a store shared between servers (a
	// fleet's) may keep one copy of it for all of them. A Store may
	// ignore it.
	Content bool
}

var _ Store = (*Cache)(nil)

// IsNil reports whether s is no store: nil, or a nil *Cache (what a Cache
// that could not be opened leaves), which as a Store is not nil.
func IsNil(s Store) bool {
	c, isCache := s.(*Cache)
	return s == nil || isCache && c == nil
}

// Cache is a bounded store of byte values on disk, one directory per API
// server. Values are written atomically (a temporary file renamed into
// place) and verified when read (CRC-32C), so a torn, truncated or foreign
// file is a miss, and is removed. Several processes may share a directory:
// compaction takes an advisory lock, and readers never see a partial entry.
//
// It is a Store; NewTransport puts kubeatlas's HTTP cache on it, and
// HTTPCache adapts it to github.com/gregjones/httpcache, for users who plug
// it into httpcache's transport, as client-go's disk-cached discovery does.
type Cache struct {
	dir  string
	opts options
	// unsafe says why the directory is not used (see Open); nil when it is.
	unsafe error

	// mu guards the in-memory view of this process's entries: their sizes,
	// and when this process last read or wrote them (recency is not written
	// to disk on reads). It is never held across disk I/O.
	mu      sync.Mutex
	entries map[string]*entryInfo
	total   int64
	stats   Stats
	// warned holds the kinds of trouble already logged: a cache that
	// cannot be written, or holds special files, says so once.
	warned sync.Map
	// dirs holds the entry directories this process has made, so that a
	// write costs no MkdirAll (one is made again if it went missing).
	dirs sync.Map
}

type entryInfo struct {
	size int64
	used time.Time
}

// Stats counts what a Cache did.
type Stats struct {
	Hits, Misses, Writes, Corrupt, WriteErrors, Evictions int64
}

// ErrUnsafeDir is the cause of Unsafe's error, and of Put's on a cache
// that does not use its directory.
var ErrUnsafeDir = errors.New("the cache directory may be written by another user")

// Open opens (creating it if needed) the cache of the API server at
// serverURL below root. The server's directory name is derived from the
// URL, so that no server name can reach outside root.
//
// As OpenSSH does for its files, the directory is used only if no other
// user can change what it holds: it, and the directories it holds, must
// be the user's (or root's) and writable by no one else (group or
// others), and so must every directory above it, unless it is sticky
// (/tmp is), so that no one can swap it later either. A directory that fails is not used, read, tidied nor written:
// Open says why once (WithLogger's logger, or slog.Default()), and the
// cache it returns answers every Get with a miss and refuses every Put
// (ErrUnsafeDir), so that the program goes on without a cache (Unsafe
// says why). Another user's cache directory, or one everyone may write,
// could hold planted entries that the user's own server would then
// confirm with 304s. On Windows, where access is a matter of ACLs, this
// check is not made.
func Open(root, serverURL string, opts ...Option) (*Cache, error) {
	o := options{maxBytes: DefaultMaxBytes, maxEntries: DefaultMaxEntries, logger: slog.New(slog.DiscardHandler), clock: clock.RealClock{}}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(root, ClusterDir(serverURL))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	c := &Cache{dir: dir, opts: o, entries: map[string]*entryInfo{}}
	if err := checkDirChain(dir); err != nil {
		c.refuse(err)
		return c, nil
	}
	if err := c.scan(); err != nil {
		if errors.Is(err, ErrUnsafeDir) {
			c.refuse(err)
			return c, nil
		}
		return nil, err
	}
	return c, nil
}

// refuse leaves the directory alone from now on, saying why, once.
func (c *Cache) refuse(why error) {
	c.unsafe = fmt.Errorf("diskcache: not using %s: %w", c.dir, why)
	c.entries, c.total = map[string]*entryInfo{}, 0
	logger := c.opts.logger
	if !c.opts.logged {
		logger = slog.Default()
	}
	logger.Warn("diskcache: not using a cache directory another user may write; going on without a cache", "dir", c.dir, "err", why)
}

// Unsafe says why the cache does not use its directory (see Open): an
// error that wraps ErrUnsafeDir, or nil when it uses it.
func (c *Cache) Unsafe() error { return c.unsafe }

// unsafeDir is a directory that fails Open's check.
type unsafeDir struct {
	path, why string
}

func (e *unsafeDir) Error() string { return e.path + ": " + e.why }
func (e *unsafeDir) Unwrap() error { return ErrUnsafeDir }

// unsafeEntry is an entry file that another user may have written (see
// checkEntryFile): never read, and removed (the directory holding it is
// the user's, or Open would have refused it).
type unsafeEntry struct{ why string }

func (e *unsafeEntry) Error() string { return "an entry another user may write: " + e.why }

// Dir is the cache's directory for its API server.
func (c *Cache) Dir() string { return c.dir }

var unsafeChars = regexp.MustCompile(`[^a-z0-9.-]+`)

// ClusterDir names a server's directory: its host made filename-safe, for
// people, then a hash of the whole URL, for uniqueness.
func ClusterDir(serverURL string) string {
	host := serverURL
	if u, err := url.Parse(serverURL); err == nil && u.Host != "" {
		host = u.Host
	}
	host = strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(host), "_"), "._-")
	if len(host) > 64 {
		host = host[:64]
	}
	sum := sha256.Sum256([]byte(serverURL))
	return host + "-" + hex.EncodeToString(sum[:6])
}

// fileName is where a Name's entry lives: two levels keep directories
// small. A Name has one file, so that a new Version replaces the old one in
// any process; the key stored in the file tells Versions apart.
func (c *Cache) fileName(name string) (dir, file string) {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:16])
	return filepath.Join(c.dir, h[:2]), h
}

// On-disk format: magic, CRC-32C of name, version and value, the lengths
// of name, version and value, then name, version, value. CRC-32C
// (hardware-accelerated, a tenth of SHA-256's cost on a 1 MB discovery
// document) is for torn and damaged files, not for an adversary who can
// write the cache directory, who could as well write anything else the user
// runs. The key is stored so that a file of another Name (another program's,
// or a hash collision) is detected, and so that a Get of another Version
// is told from the header alone, without reading the value.
var magic = [8]byte{'k', 'a', 't', 'l', 'a', 's', 0, 3}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	sumAt      = 8
	lengthsAt  = sumAt + 4
	headerSize = lengthsAt + 4 + 4 + 8
	// maxKeyBytes bounds the name and version a header may declare, so
	// that a damaged header cannot make a read allocate gigabytes.
	maxKeyBytes = 1 << 20
)

// header is an entry's fixed header.
type header struct {
	sum                 uint32
	nameLen, versionLen uint32
	valueLen            uint64
}

func (h header) keyLen() int64 { return int64(h.nameLen) + int64(h.versionLen) }

// entryHeader is the encoded header of k and a value in parts, followed by
// k's name and version (put writes the parts after it: no room is made
// for them, which cost a copy of every stored document).
func entryHeader(k Key, value ...[]byte) []byte {
	var n int
	sum := crc32.Update(0, castagnoli, []byte(k.Name))
	sum = crc32.Update(sum, castagnoli, []byte(k.Version))
	for _, v := range value {
		n += len(v)
		sum = crc32.Update(sum, castagnoli, v)
	}
	buf := make([]byte, headerSize, headerSize+len(k.Name)+len(k.Version))
	copy(buf, magic[:])
	binary.LittleEndian.PutUint32(buf[sumAt:], sum)
	binary.LittleEndian.PutUint32(buf[lengthsAt:], uint32(len(k.Name)))
	binary.LittleEndian.PutUint32(buf[lengthsAt+4:], uint32(len(k.Version)))
	binary.LittleEndian.PutUint64(buf[lengthsAt+8:], uint64(n))
	return append(append(buf, k.Name...), k.Version...)
}

var errCorrupt = errors.New("corrupt cache entry")

// parseHeader reads an entry's fixed header.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerSize || [8]byte(b[:8]) != magic {
		return header{}, fmt.Errorf("%w: not an entry of this cache", errCorrupt)
	}
	h := header{
		sum:        binary.LittleEndian.Uint32(b[sumAt:]),
		nameLen:    binary.LittleEndian.Uint32(b[lengthsAt:]),
		versionLen: binary.LittleEndian.Uint32(b[lengthsAt+4:]),
		valueLen:   binary.LittleEndian.Uint64(b[lengthsAt+8:]),
	}
	if h.keyLen() > maxKeyBytes {
		return header{}, fmt.Errorf("%w: a %d-byte key", errCorrupt, h.keyLen())
	}
	return h, nil
}

// Get returns the value stored for k. Only a regular file is read, never a
// symbolic link, FIFO or device put in an entry's place, and no more than
// its header declares and its size confirms; a value of another Version is
// a miss told from the header, and its value is not read.
func (c *Cache) Get(k Key) ([]byte, bool) {
	if c.unsafe != nil {
		c.count(func(s *Stats) { s.Misses++ })
		return nil, false
	}
	dir, name := c.fileName(k.Name)
	path := filepath.Join(dir, name)
	value, size, err := readEntry(path, k)
	if errors.Is(err, errOtherVersion) {
		// The Name in another Version: a plain miss, and the next Put
		// replaces it.
		c.count(func(s *Stats) { s.Misses++ })
		return nil, false
	}
	if err != nil {
		c.count(func(s *Stats) { s.Misses++ })
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case errors.As(err, new(*unsafeEntry)):
			c.count(func(s *Stats) { s.Corrupt++ })
			c.warnOnce("unsafe-entry", "diskcache: removing an entry another user may write", "path", path, "err", err)
			_ = os.Remove(path)
			c.forget(name)
		case errors.Is(err, errCorrupt), errors.Is(err, errOtherKey):
			// Torn, foreign, or (astronomically unlikely) another Name:
			// the file goes so the next Put starts clean.
			c.count(func(s *Stats) { s.Corrupt++ })
			c.opts.logger.Warn("diskcache: dropping unreadable entry", "path", path, "err", err)
			_ = os.Remove(path)
			c.forget(name)
		case c.removeSpecial(path):
		default:
			c.warnOnce("read", "diskcache: cannot read entries; going on without them", "path", path, "err", err)
		}
		return nil, false
	}
	c.touch(name, size)
	c.count(func(s *Stats) { s.Hits++ })
	return value, true
}

var (
	errOtherKey     = errors.New("the entry holds another key")
	errOtherVersion = errors.New("the entry holds another version")
	errNotRegular   = errors.New("not a regular file")
)

// openEntry opens an entry's file and reads its header and key, refusing
// anything but a regular file whose size is the one the header declares,
// and a file another user may write (checkEntryFile, on the same fstat).
// The file is left positioned at the value.
func openEntry(path string) (f *os.File, h header, k Key, err error) {
	if f, err = openNoFollow(path); err != nil {
		return nil, h, k, err
	}
	info, err := f.Stat()
	switch {
	case err != nil:
	case !info.Mode().IsRegular():
		err = &os.PathError{Op: "read", Path: path, Err: errNotRegular}
	default:
		if err = checkEntryFile(info); err != nil {
			break
		}
		var head [headerSize]byte
		if _, rerr := io.ReadFull(f, head[:]); rerr != nil {
			err = fmt.Errorf("%w: %v", errCorrupt, rerr)
			break
		}
		if h, err = parseHeader(head[:]); err != nil {
			break
		}
		if size := uint64(info.Size()); h.valueLen > size || headerSize+uint64(h.keyLen())+h.valueLen != size {
			err = fmt.Errorf("%w: header declares %d bytes, the file has %d", errCorrupt, headerSize+uint64(h.keyLen())+h.valueLen, size)
			break
		}
		key := make([]byte, h.keyLen())
		if _, rerr := io.ReadFull(f, key); rerr != nil {
			err = fmt.Errorf("%w: %v", errCorrupt, rerr)
			break
		}
		k = Key{Name: string(key[:h.nameLen]), Version: string(key[h.nameLen:])}
	}
	if err != nil {
		f.Close()
		return nil, h, k, err
	}
	return f, h, k, nil
}

// readEntry reads the value of want's entry at path (see openEntry for what
// it refuses), reading no more than its header declares, and verifies it;
// size is the file's. Another Name is errOtherKey; another Version,
// errOtherVersion, told before the value is read.
func readEntry(path string, want Key) (value []byte, size int64, err error) {
	f, h, k, err := openEntry(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	switch {
	case k.Name != want.Name:
		return nil, 0, errOtherKey
	case k.Version != want.Version:
		return nil, 0, errOtherVersion
	}
	value = make([]byte, h.valueLen)
	if _, err := io.ReadFull(f, value); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	sum := crc32.Update(0, castagnoli, []byte(k.Name))
	sum = crc32.Update(sum, castagnoli, []byte(k.Version))
	if crc32.Update(sum, castagnoli, value) != h.sum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	return value, headerSize + h.keyLen() + int64(h.valueLen), nil
}

// removeSpecial removes what stands at path if it is not a regular file
// (a symbolic link, FIFO, socket, device or directory in an entry's place),
// saying so once, and reports whether it did.
func (c *Cache) removeSpecial(path string) bool {
	info, err := os.Lstat(path)
	if err != nil || info.Mode().IsRegular() {
		return false
	}
	c.warnOnce("special", "diskcache: removing what is not a regular file from the cache", "path", path, "mode", info.Mode().String())
	// RemoveAll removes a link, not what it points to.
	_ = os.RemoveAll(path)
	return true
}

// warnOnce logs msg the first time trouble of its kind occurs.
func (c *Cache) warnOnce(kind, msg string, args ...any) {
	if _, seen := c.warned.LoadOrStore(kind, true); !seen {
		c.opts.logger.Warn(msg, args...)
	}
}

// Put stores value for k, atomically, replacing what k's Name held in any
// Version, and compacts when over a bound.
func (c *Cache) Put(k Key, value []byte) error { return c.put(k, value) }

// put stores the value made of parts, written one after another rather
// than copied together first (documents run to megabytes).
func (c *Cache) put(k Key, parts ...[]byte) error {
	if c.unsafe != nil {
		c.count(func(s *Stats) { s.WriteErrors++ })
		return c.unsafe
	}
	if n := len(k.Name) + len(k.Version); n > maxKeyBytes {
		return c.writeFailed(fmt.Errorf("a %d-byte key, over the %d bytes an entry may hold", n, maxKeyBytes))
	}
	dir, name := c.fileName(k.Name)
	if _, made := c.dirs.Load(dir); !made {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return c.writeFailed(err)
		}
		c.dirs.Store(dir, true)
	}
	head := entryHeader(k, parts...)
	size := int64(len(head))
	for _, p := range parts {
		size += int64(len(p))
	}
	// No fsync: a crash may lose the newest entries, never corrupt one
	// (readers verify), and an fsync per entry is what made client-go's
	// disk cache slow on macOS.
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if errors.Is(err, fs.ErrNotExist) { // removed behind our back
		if err = os.MkdirAll(dir, 0o700); err == nil {
			tmp, err = os.CreateTemp(dir, ".tmp-"+name+"-*")
		}
	}
	if err != nil {
		return c.writeFailed(err)
	}
	_, werr := tmp.Write(head)
	for _, p := range parts {
		if werr == nil {
			_, werr = tmp.Write(p)
		}
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr == nil {
		target := filepath.Join(dir, name)
		if werr = os.Rename(tmp.Name(), target); werr != nil && c.removeSpecial(target) {
			werr = os.Rename(tmp.Name(), target)
		}
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return c.writeFailed(werr)
	}
	c.touch(name, size)
	c.count(func(s *Stats) { s.Writes++ })
	if c.overBounds() {
		return c.Compact()
	}
	return nil
}

// writeFailed counts a failed write and logs the first: a cache that
// cannot be written (a read-only directory, a full disk) says so once, not
// on every write.
func (c *Cache) writeFailed(err error) error {
	c.count(func(s *Stats) { s.WriteErrors++ })
	err = fmt.Errorf("diskcache: write: %w", err)
	c.warnOnce("write", "diskcache: cannot write entries; going on without storing them", "dir", c.dir, "err", err)
	return err
}

// Delete removes what k's Name holds, in any Version.
func (c *Cache) Delete(k Key) {
	if c.unsafe != nil {
		return
	}
	dir, name := c.fileName(k.Name)
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.opts.logger.Warn("diskcache: could not delete entry", "name", k.Name, "err", err)
	}
	c.forget(name)
}

// HTTPCache is the cache as a github.com/gregjones/httpcache.Cache, for
// users who plug it into httpcache's transport, as client-go's
// disk-cached discovery does: httpcache's key is the Name. Set logs its
// error (the first of them), as httpcache's interface cannot return it,
// and counts it in Stats.WriteErrors.
func (c *Cache) HTTPCache() HTTPCache { return HTTPCache{c} }

// HTTPCache is a Cache as a github.com/gregjones/httpcache.Cache (see
// Cache.HTTPCache); the zero value is an empty cache that keeps nothing.
type HTTPCache struct{ c *Cache }

// Get returns what key holds.
func (h HTTPCache) Get(key string) ([]byte, bool) {
	if h.c == nil {
		return nil, false
	}
	return h.c.Get(Key{Name: key})
}

// Set stores value for key.
func (h HTTPCache) Set(key string, value []byte) {
	if h.c != nil {
		_ = h.c.Put(Key{Name: key}, value)
	}
}

// Delete removes key.
func (h HTTPCache) Delete(key string) {
	if h.c != nil {
		h.c.Delete(Key{Name: key})
	}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Usage is the size and number of this cache's entries, as this process
// knows them.
func (c *Cache) Usage() (bytes int64, entries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, len(c.entries)
}

func (c *Cache) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

func (c *Cache) touch(name string, size int64) {
	now := c.opts.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[name]; ok {
		c.total += size - e.size
		e.size, e.used = size, now
		return
	}
	c.entries[name] = &entryInfo{size: size, used: now}
	c.total += size
}

func (c *Cache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[name]; ok {
		c.total -= e.size
		delete(c.entries, name)
	}
}

func (c *Cache) overBounds() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > c.opts.maxBytes || len(c.entries) > c.opts.maxEntries
}

// scan learns the entries already on disk, with their modification time as
// their recency, and tidies the directory on the way (see walk).
func (c *Cache) scan() error {
	found := map[string]*entryInfo{}
	var total int64
	err := c.walk(func(e diskEntry) {
		found[e.name] = &entryInfo{size: e.size, used: e.used}
		total += e.size
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.entries, c.total = found, total
	c.mu.Unlock()
	return nil
}

// walk visits every entry file and tidies what is not one, so that junk
// never stays for good: temporary files of writers that died (older than
// staleTemp), files that are not entries, and anything that is not a regular
// file where an entry or a file belongs. Directories it does not know are
// left alone (and not descended into). A subdirectory that cannot be read
// is skipped, said once; only the cache's own directory must be readable.
func (c *Cache) walk(visit func(diskEntry)) error {
	now := c.opts.clock.Now()
	var junk int
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by another process meanwhile
			}
			if path == c.dir {
				return err
			}
			c.warnOnce("walk", "diskcache: skipping what cannot be read in the cache", "path", path, "err", err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(c.dir, path)
		depth := strings.Count(rel, string(filepath.Separator))
		name := d.Name()
		switch {
		case path == c.dir:
			return nil
		case d.IsDir():
			if depth == 0 && isHex(name, 2) {
				// Where entries are written: as safe as the directory.
				if info, err := d.Info(); err == nil {
					if err := checkOwnDir(path, info); err != nil {
						return err
					}
				}
				return nil
			}
			if depth == 1 && isHex(name, 32) {
				c.removeSpecial(path) // a directory in an entry's place
			}
			return fs.SkipDir
		case depth == 0 && name == ".lock":
			return nil
		case depth == 1 && d.Type().IsRegular() && isHex(name, 32):
			info, err := d.Info()
			if err != nil {
				return nil
			}
			if checkEntryFile(info) == nil {
				visit(diskEntry{path: path, name: name, size: info.Size(), used: info.ModTime()})
				return nil
			}
			// Another user may write it: removed below, as junk is.
		case depth == 1 && d.Type().IsRegular() && strings.HasPrefix(name, ".tmp-"):
			if info, err := d.Info(); err == nil && now.Sub(info.ModTime()) <= staleTemp {
				return nil // a write under way
			}
		}
		if err := os.Remove(path); err == nil {
			junk++
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrUnsafeDir) {
			return err
		}
		return fmt.Errorf("diskcache: scanning %s: %w", c.dir, err)
	}
	if junk > 0 {
		c.opts.logger.Debug("diskcache: removed files that were not entries", "dir", c.dir, "count", junk)
	}
	return nil
}

// isHex: s is n lowercase hexadecimal digits, as entry names are.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

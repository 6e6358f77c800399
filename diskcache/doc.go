// Package diskcache is a bounded, checksummed, multi-process-safe store of
// HTTP responses and documents on disk, the cache KEP-2896 promised for
// OpenAPI v3: kubectl's ~/.kube/cache/http keeps every superseded ?hash=
// document forever, and its discovery cache is hundreds of files.
//
// A Cache serves one API server from its own directory (ClusterDir names
// it from the server URL, so no server name can reach outside the root).
// Entries are written atomically (temporary file, then rename; no fsync),
// verified on every read (regular files only, never a link, FIFO or
// device; CRC-32C, lengths, the stored key), and a torn, truncated or
// foreign file is a miss that is removed. A file is named by its key's
// Name; the key's Version is stored in it, so that a new Version replaces
// the old file in any process (openapi3 names a document by its path and
// Accept, with its ?hash= as the Version: one file per live document, with
// nothing superseded left behind). Opening a cache
// tidies it (stale temporary files, files that are not entries). Total size
// and entry count are bounded: compaction, under an advisory lock so that
// one process compacts at a time, drops the least recently used entries.
// While another process holds the lock, a writer over a bound evicts what
// it knows without it, so the bounds hold whoever holds the lock.
// Recency of reads is kept in memory, not written to disk per read. Write
// failures are returned, counted, and logged once. As OpenSSH does for its
// files, a directory another user may write (not the user's or root's,
// writable by group or others, or below a directory anyone may write that
// is not sticky) is not used: Open says so once and the cache is empty
// and refuses writes ([Cache.Unsafe], [ErrUnsafeDir]). An entry file
// another user may write (theirs, or writable by group or others) is
// checked on the fstat its read makes anyway, never read, and removed.
//
// # Stores and the HTTP cache
//
// [Store] is what discovery and openapi3 keep their bytes in (get, put with
// an error, delete), by a typed [Key]: one value per Name, in one Version,
// and whether it is Content (the value Version names, verified, the same
// from any server: a fleet's shared store keeps one copy). The store knows
// nothing of what keys mean; naming is its callers' policy. [Cache] is a
// Store, and diskcachetest.Run is the acceptance suite any other runs
// (versions, corruption is a miss, put errors are returned, bounds hold).
// [NewTransport] puts an HTTP cache on a Store, keyed by [URLKey] (URL
// without client-go's timeout= parameter, and Accept) or the caller's
// [WithKey], with one path for every GET: a fresh entry (an OpenAPI
// document at a ?hash= URL, immutable by KEP-2896) is the answer with no
// request, an entry with an ETag is revalidated and its 304 answered from
// the store, a new response is stored as it is read. Nothing is stored that
// fails its checks: an empty 200 is never stored, and JSON must parse,
// or instead the caller's [WithCheck] must pass (openapi3's verifies a
// document's SHA-512 against its ?hash=, once, and hands the verdict to its
// caller). [Cache.HTTPCache] adapts a Cache to
// github.com/gregjones/httpcache, for users who plug it into client-go's
// httpcache-based transports; entries are in httpcache's form, so either
// reads the other's.
// discovery.WithDiskCache keeps a cluster's discovery in one entry for warm
// starts; openapi3.WithDiskCache serves unchanged documents without a
// request.
//
// # Files
//
//   - cache.go: [Store], [Key], [Cache], entries on disk, Open's tidying,
//     [HTTPCache].
//   - compact.go: compaction under the advisory lock.
//   - transport.go: [NewTransport], [URLKey], [WithKey], [WithCheck],
//     [StoredBody].
//   - lock_*.go, open_*.go: the advisory lock, opening regular files only,
//     and the directory ownership check, per platform.
package diskcache
